package helmtest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	batchv1 "k8s.io/api/batch/v1"
)

// TestHookJobsRun runs the command lines of the Argo CD example's hook
// Jobs, as rendered, against a live keeper: the PreSync Jobs take each kept
// data's point; after a release that changed the data, the SyncFail Jobs
// put the points back, set the changed data aside and hand back the
// aside's id. Only the credentials' file flags are left out (the test's
// server has no users); NATS_URL is the Job's way to the bus, as in a pod.
func TestHookJobsRun(t *testing.T) {
	objs, err := render(loadChart(t), readValues(t, filepath.Join(chartDir, "examples", "argocd-hooks.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	k := startKeeper(t)
	nc, err := nats.Connect(k.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	buckets := map[string]jetstream.KeyValue{}
	for _, local := range []string{"ledger", "invoices"} {
		kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "billing_" + local})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.PutString(t.Context(), "acct-1", "form 3"); err != nil {
			t.Fatal(err)
		}
		buckets[local] = kv
	}
	for _, j := range hookJobs(objs, "PreSync") {
		var rep struct {
			Point *struct{ Module, Local, Fingerprint string }
		}
		runJob(t, k, j, &rep)
		if rep.Point == nil || rep.Point.Module != "billing" || rep.Point.Fingerprint != "9f2c1a7e" {
			t.Errorf("PreSync job %s took %+v, not billing's point before 9f2c1a7e", j.Name, rep.Point)
		}
	}
	for _, kv := range buckets { // the release's migration, which then fails
		if _, err := kv.PutString(t.Context(), "acct-1", "half-way to form 4"); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range hookJobs(objs, "SyncFail") {
		var rep struct {
			Aside *struct{ ID, Local, Point string }
		}
		runJob(t, k, j, &rep)
		if rep.Aside == nil || rep.Aside.ID == "" || rep.Aside.Point == "" {
			t.Fatalf("SyncFail job %s handed back no aside id: %+v", j.Name, rep.Aside)
		}
		e, err := buckets[rep.Aside.Local].Get(t.Context(), "acct-1")
		if err != nil || string(e.Value()) != "form 3" {
			t.Errorf("after SyncFail job %s, billing/%s acct-1 is %v (%v), not the point's form 3", j.Name, rep.Aside.Local, e, err)
		}
	}
}

// hookJobs are the Jobs of one Argo CD hook.
func hookJobs(objs *objects, hook string) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range objs.Jobs {
		if j.Annotations["argocd.argoproj.io/hook"] == hook {
			out = append(out, j)
		}
	}
	return out
}

// jobCmd is the Job's container's command line with this checkout's
// binary, its credentials' file flags left out, its environment with
// NATS_URL the keeper's server.
func jobCmd(t *testing.T, k *runningKeeper, j batchv1.Job) *exec.Cmd {
	t.Helper()
	c := j.Spec.Template.Spec.Containers[0]
	var args []string
	for i := 0; i < len(c.Args); i++ {
		if slices.Contains(fileFlags, c.Args[i]) {
			i++
			continue
		}
		args = append(args, c.Args[i])
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = []string{"NATS_URL=" + k.natsURL}
	for _, e := range c.Env {
		if e.Name != "NATS_URL" {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
	}
	return cmd
}

// runJob runs the Job's command line (jobCmd) and decodes its JSON output
// into rep.
func runJob(t *testing.T, k *runningKeeper, j batchv1.Job, rep any) {
	t.Helper()
	cmd := jobCmd(t, k, j)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("job %s: %s: %v\n%s", j.Name, strings.Join(cmd.Args, " "), err, out)
	}
	if err := json.Unmarshal(out, rep); err != nil {
		t.Fatalf("job %s printed no JSON: %v\n%s", j.Name, err, out)
	}
}

// TestHooksAsDependency renders the chart as the README shows a module's
// release using it: a dependency of the module's own chart, its values
// under the module's nats-keeper key, the keepers off. The hook Job is
// rendered, named for the release, and nothing else of the chart is.
func TestHooksAsDependency(t *testing.T) {
	module := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "billing", Version: "1.4.0",
		Dependencies: []*chart.Dependency{{Name: "nats-keeper", Version: "0.1.0", Repository: "file://../nats-keeper"}}}}
	module.AddDependency(loadChart(t))
	vals := map[string]any{"nats-keeper": readValues(t, filepath.Join(chartDir, "examples", "helm-hooks.yaml"))}
	objs, err := render(module, vals)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Deployments)+len(objs.Services)+len(objs.ServiceAccounts)+len(objs.PDBs) != 0 || len(objs.Jobs) != 1 {
		t.Fatalf("the module's release renders %d deployments, %d services, %d service accounts, %d PDBs and %d jobs; want the hook Job alone",
			len(objs.Deployments), len(objs.Services), len(objs.ServiceAccounts), len(objs.PDBs), len(objs.Jobs))
	}
	j := objs.Jobs[0]
	if j.Name != "nk-nats-keeper-point-0" || j.Annotations["helm.sh/hook"] != "pre-upgrade" {
		t.Errorf("job %s with hook %q, want nk-nats-keeper-point-0 at pre-upgrade", j.Name, j.Annotations["helm.sh/hook"])
	}
	wantArgs(t, checkHookJob(t, j, "snapshot-kept").Args, "snapshot-kept", "--form", "3", "--before", "9f2c1a7e")
	// The subchart's schema holds under the module's key too.
	vals["nats-keeper"].(map[string]any)["hooks"].(map[string]any)["mode"] = "flux"
	if _, err := render(module, vals); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("a module's release with hooks.mode flux rendered (err %v); want the schema's refusal", err)
	}
}

// TestPolicyJobsRun runs the command lines of the policy Jobs, as rendered
// from the nats-store example, against a live keeper: the policies are
// recorded in its index. A schedule (`every`, with a time zone) is rendered
// as --every and --time-zone; it runs too where the binary schedules points.
func TestPolicyJobsRun(t *testing.T) {
	ch := loadChart(t)
	objs, err := render(ch, readValues(t, filepath.Join(chartDir, "examples", "nats-store.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	k := startKeeper(t)
	for _, j := range objs.Jobs {
		runJobText(t, k, j)
	}
	if out := k.cli(t, true, "policy", "show", "billing", "ledger"); !strings.Contains(out, "policy.billing.ledger") || !strings.Contains(out, "30d") {
		t.Errorf("policy show billing ledger after the Jobs: %s", out)
	}
	if out := k.cli(t, true, "policy", "show"); !strings.Contains(out, "policy.default") {
		t.Errorf("policy show after the Jobs: %s", out)
	}

	scheduled, err := render(ch, map[string]any{"policies": []any{map[string]any{
		"module": "shop", "local": "cart", "every": "0 3 * * *", "timeZone": "Europe/Berlin", "keepLast": 3}}})
	if err != nil {
		t.Fatal(err)
	}
	j := scheduled.Jobs[0]
	wantArgs(t, j.Spec.Template.Spec.Containers[0].Args, "shop", "--every", "0 3 * * *", "--time-zone", "Europe/Berlin", "--keep-last", "3")
	if !schedules(t) {
		t.Log("this binary takes no scheduled points (policy has no --every): the schedule's Job is checked once they are merged")
		return
	}
	checkJob(t, j, "policy", "set")
	runJobText(t, k, j)
}

// runJobText runs the Job's command line (jobCmd), for a command that
// prints text.
func runJobText(t *testing.T, k *runningKeeper, j batchv1.Job) {
	t.Helper()
	cmd := jobCmd(t, k, j)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("job %s: %s: %v\n%s", j.Name, strings.Join(cmd.Args, " "), err, out)
	}
}
