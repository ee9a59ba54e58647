package helmtest

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// peakRSS is the keeper's largest peak RSS in BENCHMARKS.md's big
// operations on any store (59.7–61.7 MiB in the latest runs, at most 70 MiB
// in any): the memory the chart must request at least, and limit above.
var peakRSS = resource.MustParse("70Mi")

func TestChartDefaults(t *testing.T) {
	objs, err := render(loadChart(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Deployments) != 1 || len(objs.Services) != 1 || len(objs.PDBs) != 1 || len(objs.ServiceAccounts) != 1 {
		t.Fatalf("defaults render %d deployments, %d services, %d PDBs, %d service accounts; want one each",
			len(objs.Deployments), len(objs.Services), len(objs.PDBs), len(objs.ServiceAccounts))
	}
	if len(objs.Jobs)+len(objs.ServiceMonitors)+len(objs.PodMonitors) != 0 {
		t.Errorf("defaults render hooks or monitors: %d jobs, %d service monitors, %d pod monitors",
			len(objs.Jobs), len(objs.ServiceMonitors), len(objs.PodMonitors))
	}
	d := objs.Deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	c := checkKeeperPod(t, d.Spec.Template.Spec)
	wantArgs(t, c.Args, "--store", "nats://nats:4222/nats-keeper-points")
	if env := envOf(c, "NATS_URL"); env == nil || env.Value != "nats://nats:4222" {
		t.Errorf("NATS_URL %+v, want nats://nats:4222", env)
	}
	req, lim := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
	if req.Cmp(peakRSS) < 0 || lim.Cmp(req) < 0 {
		t.Errorf("memory request %s, limit %s: want a request of at least the peak RSS %s and a limit above it", &req, &lim, &peakRSS)
	}
	pod := d.Spec.Template.Labels
	pdb := objs.PDBs[0]
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || !matches(pdb.Spec.Selector.MatchLabels, pod) {
		t.Errorf("the PDB %+v does not let one keeper at a time go, or selects other pods than %v", pdb.Spec, pod)
	}
	svc := objs.Services[0]
	if !matches(svc.Spec.Selector, pod) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9464 {
		t.Errorf("the metrics Service %+v does not reach the keepers' port 9464", svc.Spec)
	}
}

// checkKeeperPod checks what every keeper pod needs, whatever the values:
// serve with a --dir inside an emptyDir, /metrics and /healthz on the
// metrics port and probes on /healthz, a non-root read-only security
// context, every flag one serve takes and every file it is given mounted.
// It returns the keeper's container.
func checkKeeperPod(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	checkPodSecurity(t, spec)
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the keeper alone", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/nats-keeper"}) || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("the container runs %v %v, not /nats-keeper serve", c.Command, c.Args)
	}
	checkFlags(t, c.Args, helpOf(t, "serve"))
	wantArgs(t, c.Args, "--metrics-listen", ":9464")
	dir := argOf(t, c.Args, "--dir")
	m := mountOf(c, filepath.Dir(dir))
	if m == nil || m.ReadOnly || volumeOf(spec, m.Name) == nil || volumeOf(spec, m.Name).EmptyDir == nil {
		t.Errorf("--dir %s is not inside a writable emptyDir (mount %+v)", dir, m)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9464 {
		t.Errorf("ports %+v, want metrics 9464", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("metrics") {
			t.Errorf("the %s probe %+v is not GET /healthz on the metrics port", name, p)
		}
	}
	if lp := c.LivenessProbe; lp != nil && lp.PeriodSeconds*lp.FailureThreshold < 60 {
		t.Errorf("liveness gives up after %d s: a bus restarting would restart the keepers", lp.PeriodSeconds*lp.FailureThreshold)
	}
	checkFilesMounted(t, spec, c)
	return c
}

// checkPodSecurity: not root, no privilege escalation, nothing writable
// but volumes, no capability, no service account token.
func checkPodSecurity(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the pod's security context %+v does not run as a user other than root with the runtime's seccomp profile", ps)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token it does not need")
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s: security context %+v is not read-only, without privilege escalation and capabilities", c.Name, sc)
		}
	}
}

// fileFlags are the flags that name a file the pod must hold.
var fileFlags = []string{"--creds", "--nkey", "--tls-cert", "--tls-key", "--tls-ca", "--identity",
	"--store-creds", "--store-nkey", "--store-tls-cert", "--store-tls-key", "--store-tls-ca"}

// checkFilesMounted: every file a flag names is under a read-only mount of
// a volume the pod has; a Secret's items name the file.
func checkFilesMounted(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	for i := 0; i+1 < len(c.Args); i++ {
		if !slices.Contains(fileFlags, c.Args[i]) {
			continue
		}
		path := c.Args[i+1]
		m := mountOf(c, filepath.Dir(path))
		if m == nil || !m.ReadOnly {
			t.Errorf("%s %s: no read-only mount at %s", c.Args[i], path, filepath.Dir(path))
			continue
		}
		v := volumeOf(spec, m.Name)
		switch {
		case v == nil:
			t.Errorf("%s %s: the mount %s has no volume", c.Args[i], path, m.Name)
		case v.Secret != nil && !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == filepath.Base(path) }):
			t.Errorf("%s %s: the Secret %s has no item %s (items %+v)", c.Args[i], path, v.Secret.SecretName, filepath.Base(path), v.Secret.Items)
		}
	}
}

// flagRE finds a command line's flags.
var flagRE = regexp.MustCompile(`^--[a-z][a-z0-9-]*$`)

// checkFlags: every flag in args is one the command's help names.
func checkFlags(t *testing.T, args []string, help string) {
	t.Helper()
	for _, a := range args {
		if flagRE.MatchString(a) && !strings.Contains(help, a+" ") {
			t.Errorf("the chart passes %s, which the command does not take", a)
		}
	}
}

func TestChartExamples(t *testing.T) {
	ch := loadChart(t)
	checks := map[string]func(*testing.T, *objects){
		"nats-store.yaml":   checkNatsStoreExample,
		"s3-store.yaml":     checkS3StoreExample,
		"helm-hooks.yaml":   checkHelmHooksExample,
		"argocd-hooks.yaml": checkArgoHooksExample,
	}
	for _, file := range examples(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			check := checks[filepath.Base(file)]
			if check == nil {
				t.Fatalf("no test checks the example %s: add one to TestChartExamples", file)
			}
			objs, err := render(ch, readValues(t, file))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range objs.Deployments {
				checkKeeperPod(t, d.Spec.Template.Spec)
			}
			check(t, objs)
		})
	}
}

func checkNatsStoreExample(t *testing.T, objs *objects) {
	if len(objs.Deployments) != 1 || len(objs.ServiceMonitors) != 1 || len(objs.PodMonitors) != 0 {
		t.Fatalf("%d deployments, %d service monitors, %d pod monitors; want 1, 1, 0", len(objs.Deployments), len(objs.ServiceMonitors), len(objs.PodMonitors))
	}
	d := objs.Deployments[0]
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	wantArgs(t, c.Args, "--store", "nats://nats.nats.svc:4222/nats-keeper-points", "--store-replicas", "3", "--replicas", "3",
		"--prune-every", "1h", "--creds", "/etc/nats-keeper/secret/nats.creds", "--js-domain", "hub", "--free-margin", "256MiB")
	v := volumeOf(d.Spec.Template.Spec, "credentials")
	if v == nil || v.Secret == nil || v.Secret.SecretName != "nats-keeper" || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "keeper.creds" {
		t.Errorf("the credentials volume %+v is not the Secret nats-keeper's keeper.creds alone", v)
	}
	if len(objs.Jobs) != 2 {
		t.Fatalf("%d jobs, want the two policies'", len(objs.Jobs))
	}
	for _, j := range objs.Jobs {
		wantAnnotations(t, j, map[string]string{"helm.sh/hook": "post-install,post-upgrade"}, "argocd.argoproj.io/hook")
		checkJob(t, j, "policy", "set")
	}
	wantArgs(t, objs.Jobs[0].Spec.Template.Spec.Containers[0].Args, "--keep-last", "5", "--keep-daily", "7", "--keep-weekly", "4")
	wantArgs(t, objs.Jobs[1].Spec.Template.Spec.Containers[0].Args, "billing", "--keep-within", "30d", "--creds", "/etc/nats-keeper/secret/nats.creds")
	sm := objs.ServiceMonitors[0]
	// The rules select job="nats-keeper": the monitor's job label gives it.
	if sm.Spec.JobLabel != "app.kubernetes.io/name" || objs.Services[0].Labels[sm.Spec.JobLabel] != "nats-keeper" {
		t.Errorf("the ServiceMonitor's job label %q is %q on the Service, not nats-keeper", sm.Spec.JobLabel, objs.Services[0].Labels[sm.Spec.JobLabel])
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Labels["release"] != "kube-prometheus-stack" || !matches(sm.Spec.Selector.MatchLabels, objs.Services[0].Labels) {
		t.Errorf("the ServiceMonitor %+v does not scrape the metrics Service's port", sm)
	}
}

func checkS3StoreExample(t *testing.T, objs *objects) {
	if len(objs.Deployments) != 1 || len(objs.PodMonitors) != 1 {
		t.Fatalf("%d deployments, %d pod monitors; want 1, 1", len(objs.Deployments), len(objs.PodMonitors))
	}
	spec := objs.Deployments[0].Spec.Template.Spec
	c := spec.Containers[0]
	wantArgs(t, c.Args, "--store", "s3://nats-keeper-points/prod", "--s3-endpoint", "https://minio.storage.svc:9000",
		"--s3-region", "eu-west-1", "--nkey", "/etc/nats-keeper/secret/nats.nk", "--tls-ca", "/etc/nats-keeper/secret/ca.crt",
		"--aside-warn-after", "168h", "--encrypt-to", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p")
	if !slices.Contains(c.Args, "--s3-path-style") {
		t.Errorf("args %v lack --s3-path-style", c.Args)
	}
	for name, key := range map[string]string{"AWS_ACCESS_KEY_ID": "s3-access-key-id", "AWS_SECRET_ACCESS_KEY": "s3-secret-access-key"} {
		e := envOf(c, name)
		if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "nats-keeper" || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s is %+v, not the Secret nats-keeper's %s", name, e, key)
		}
	}
	// The identity: copied by an init container as the keeper's user, 0600,
	// into a memory-backed emptyDir, and read from there.
	id := argOf(t, c.Args, "--identity")
	v := volumeOf(spec, mountOf(c, filepath.Dir(id)).Name)
	if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("--identity %s is not in a memory-backed emptyDir: %+v", id, v)
	}
	if len(spec.InitContainers) != 1 || !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), "umask 077 && cat /in/identity > "+id) ||
		mountOf(spec.InitContainers[0], filepath.Dir(id)) == nil {
		t.Errorf("no init container copies the identity, 0600, to %s: %+v", id, spec.InitContainers)
	}
	pm := objs.PodMonitors[0]
	if pm.Spec.JobLabel != "app.kubernetes.io/name" || objs.Deployments[0].Spec.Template.Labels[pm.Spec.JobLabel] != "nats-keeper" {
		t.Errorf("the PodMonitor's job label %q is %q on the pods, not nats-keeper", pm.Spec.JobLabel, objs.Deployments[0].Spec.Template.Labels[pm.Spec.JobLabel])
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Port == nil || *pm.Spec.PodMetricsEndpoints[0].Port != "metrics" ||
		!matches(pm.Spec.Selector.MatchLabels, objs.Deployments[0].Spec.Template.Labels) {
		t.Errorf("the PodMonitor %+v does not scrape the keepers' metrics port", pm.Spec)
	}
}

func checkHelmHooksExample(t *testing.T, objs *objects) {
	if len(objs.Deployments)+len(objs.Services)+len(objs.PDBs) != 0 || len(objs.Jobs) != 1 {
		t.Fatalf("%d deployments, %d services, %d PDBs, %d jobs; want the hook Job alone",
			len(objs.Deployments), len(objs.Services), len(objs.PDBs), len(objs.Jobs))
	}
	j := objs.Jobs[0]
	wantAnnotations(t, j, map[string]string{"helm.sh/hook": "pre-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}, "argocd.argoproj.io/hook")
	c := checkHookJob(t, j, "snapshot-kept")
	wantArgs(t, c.Args, "snapshot-kept", "billing", "--form", "3", "--before", "9f2c1a7e", "--catch-up", "ledger-migrate-3-to-4",
		"--keep-for", "30d", "--caller", "helm:nk", "--creds", "/etc/nats-keeper/secret/nats.creds")
}

func checkArgoHooksExample(t *testing.T, objs *objects) {
	if len(objs.Deployments) != 0 || len(objs.Jobs) != 4 {
		t.Fatalf("%d deployments, %d jobs; want 4 jobs alone", len(objs.Deployments), len(objs.Jobs))
	}
	kept := map[string]string{"ledger": "3", "invoices": "7"}
	seen := map[string]int{}
	for _, j := range objs.Jobs {
		hook := j.Annotations["argocd.argoproj.io/hook"]
		verb := map[string]string{"PreSync": "snapshot-kept", "SyncFail": "restore-kept"}[hook]
		if verb == "" {
			t.Fatalf("job %s has the Argo CD hook %q, not PreSync or SyncFail", j.Name, hook)
		}
		wantAnnotations(t, j, map[string]string{"argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation"}, "helm.sh/hook")
		c := checkHookJob(t, j, verb)
		local := c.Args[2]
		wantArgs(t, c.Args, verb, "billing", "--form", kept[local], "--before", "9f2c1a7e", "--caller", "argocd:nk")
		seen[hook+" "+local]++
		if verb == "restore-kept" {
			if why := argOf(t, c.Args, "--why"); !strings.Contains(why, "sync of nk failed") {
				t.Errorf("the restore's --why %q does not say the sync failed", why)
			}
			if *j.Spec.BackoffLimit != 0 {
				t.Errorf("the SyncFail Job retries %d times: a second restore would set aside the first one's result", *j.Spec.BackoffLimit)
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("hooks %v: want PreSync and SyncFail of ledger and of invoices", seen)
	}
}

// checkHookJob: a hook Job runs the nats-keeper image's CLI verb once,
// prints JSON (the aside's id of a restore), with the pod's security and
// its credentials mounted. It returns the container.
func checkHookJob(t *testing.T, j batchv1.Job, verb string) corev1.Container {
	t.Helper()
	c := checkJob(t, j, verb)
	if !slices.Contains(c.Args, "--json") {
		t.Errorf("job %s runs %v without --json", j.Name, c.Args)
	}
	return c
}

// checkJob: a Job runs `nats-keeper command...` of the nats-keeper image
// once, every flag one the command takes, with the pod's security, its
// credentials mounted and NATS_URL set. It returns the container.
func checkJob(t *testing.T, j batchv1.Job, command ...string) corev1.Container {
	t.Helper()
	spec := j.Spec.Template.Spec
	checkPodSecurity(t, spec)
	if spec.RestartPolicy != corev1.RestartPolicyNever || len(spec.Containers) != 1 {
		t.Fatalf("job %s: restart policy %s, %d containers", j.Name, spec.RestartPolicy, len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/nats-keeper"}) || !strings.HasPrefix(c.Image, "nats-keeper:") ||
		len(c.Args) < len(command) || !slices.Equal(c.Args[:len(command)], command) {
		t.Fatalf("job %s runs %s %v %v, not the nats-keeper image's %s", j.Name, c.Image, c.Command, c.Args, strings.Join(command, " "))
	}
	checkFlags(t, c.Args, helpOf(t, command[0]))
	checkFilesMounted(t, spec, c)
	if e := envOf(c, "NATS_URL"); e == nil || e.Value == "" {
		t.Errorf("job %s has no NATS_URL", j.Name)
	}
	return c
}

func wantAnnotations(t *testing.T, j batchv1.Job, want map[string]string, absent string) {
	t.Helper()
	for k, v := range want {
		if j.Annotations[k] != v {
			t.Errorf("job %s: annotation %s is %q, want %q", j.Name, k, j.Annotations[k], v)
		}
	}
	if _, ok := j.Annotations[absent]; ok {
		t.Errorf("job %s has the annotation %s too", j.Name, absent)
	}
}

// wantArgs: args hold want, in pairs of flag and value (a first lone word
// is a positional argument that must be there).
func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	if len(want)%2 == 1 {
		if !slices.Contains(args, want[0]) {
			t.Errorf("args %v lack %s", args, want[0])
		}
		want = want[1:]
	}
	for i := 0; i < len(want); i += 2 {
		found := false
		for j := 0; j+1 < len(args); j++ {
			found = found || (args[j] == want[i] && args[j+1] == want[i+1])
		}
		if !found {
			t.Errorf("args %v lack %s %s", args, want[i], want[i+1])
		}
	}
}

// argOf is the value of flag in args.
func argOf(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %v lack %s", args, flag)
	}
	return args[i+1]
}

func envOf(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func mountOf(c corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volumeOf(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// matches: every label of sel is in labels.
func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestChartSchemaRefuses(t *testing.T) {
	ch := loadChart(t)
	bad := map[string]struct {
		vals map[string]any
		says string
	}{
		"no keepers":               {map[string]any{"replicaCount": 0}, "replicaCount"},
		"a store of its own":       {map[string]any{"store": map[string]any{"url": "file:///var/lib/nats-keeper"}}, "store"},
		"a form that is text":      {map[string]any{"hooks": map[string]any{"enabled": true, "kept": []any{map[string]any{"module": "billing", "local": "ledger", "form": "3", "before": "9f2c1a7e"}}}}, "form"},
		"a kept data unnamed":      {map[string]any{"hooks": map[string]any{"enabled": true, "kept": []any{map[string]any{"module": "billing", "form": 3, "before": "9f2c1a7e"}}}}, "local"},
		"a module with a dot":      {map[string]any{"hooks": map[string]any{"enabled": true, "kept": []any{map[string]any{"module": "bill.ing", "local": "ledger", "form": 3, "before": "9f2c1a7e"}}}}, "module"},
		"a hook mode unknown":      {map[string]any{"hooks": map[string]any{"mode": "flux"}}, "mode"},
		"a duration in days":       {map[string]any{"serve": map[string]any{"asideWarnAfter": "14d"}}, "asideWarnAfter"},
		"a log format unknown":     {map[string]any{"serve": map[string]any{"logFormat": "xml"}}, "logFormat"},
		"a misspelled value":       {map[string]any{"serve": map[string]any{"prefixx": "ops"}}, "prefixx"},
		"too many heavy verbs":     {map[string]any{"serve": map[string]any{"maxHeavy": 65}}, "maxHeavy"},
		"a policy keeping nothing": {map[string]any{"policies": []any{map[string]any{"module": "billing", "local": "ledger"}}}, "policies"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := render(ch, c.vals)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("rendered with %v: err %v, want the schema's refusal naming %s", c.vals, err, c.says)
			}
		})
	}
	// Refusals of the templates, where the schema cannot see the whole.
	for _, c := range []struct {
		vals map[string]any
		says string
	}{
		{map[string]any{"credentials": map[string]any{"creds": "keeper.creds"}}, "credentials.secretName"},
		{map[string]any{"hooks": map[string]any{"enabled": true}}, "hooks.kept"},
		{map[string]any{"policies": []any{map[string]any{"module": "billing", "keepLast": 3}}}, "policies[0]"},
		{map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}}, "metrics.service.enabled"},
	} {
		if _, err := render(ch, c.vals); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("rendered with %v: err %v, want a refusal naming %s", c.vals, err, c.says)
		}
	}
}

// TestChartLint runs Helm's own linter (as `helm lint` does) with the
// defaults and with each example: no error and no warning.
func TestChartLint(t *testing.T) {
	cases := map[string]map[string]any{"defaults": nil}
	for _, file := range examples(t) {
		cases[filepath.Base(file)] = readValues(t, file)
	}
	for name, vals := range cases {
		l := lint.RunAll(chartDir, vals, release.Namespace)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: %s", name, m)
			}
		}
	}
}
