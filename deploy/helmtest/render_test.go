// Package helmtest checks deploy/: the Helm chart rendered with Helm's own
// library and decoded into the Kubernetes API types, the Prometheus rules
// and the Grafana dashboard against Prometheus's parser and a live keeper's
// /metrics. It is a module of its own, so that the project's go.mod does
// not grow by the Kubernetes and Prometheus trees.
package helmtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test.
const chartDir = "../helm/nats-keeper"

// release is the release the tests render: its name and namespace.
var release = common.ReleaseOptions{Name: "nk", Namespace: "ops", IsInstall: true, Revision: 1}

// objects is one rendering of the chart, decoded strictly into the API
// types: a field the type does not have is an error.
type objects struct {
	Deployments     []appsv1.Deployment
	Services        []corev1.Service
	ServiceAccounts []corev1.ServiceAccount
	PDBs            []policyv1.PodDisruptionBudget
	Jobs            []batchv1.Job
	ServiceMonitors []monitoringv1.ServiceMonitor
	PodMonitors     []monitoringv1.PodMonitor
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// readValues reads a values file.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vals
}

// render renders the chart with vals over its defaults, validating them
// against values.schema.json as `helm install` does, and decodes every
// object.
func render(ch *chart.Chart, vals map[string]any) (*objects, error) {
	rv, err := util.ToRenderValuesWithSchemaValidation(ch, vals, release, nil, false)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	slices.Sort(names)
	objs := &objects{}
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		if err := objs.decode(name, out[name]); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// decode decodes every YAML document of one rendered template.
func (o *objects) decode(name, text string) error {
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, doc)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // a document of comments only
		}
		if err := o.add(js); err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, doc)
		}
	}
}

func (o *objects) add(js []byte) error {
	var meta struct{ APIVersion, Kind string }
	if err := json.Unmarshal(js, &meta); err != nil {
		return err
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		return strictAppend(js, &o.Deployments)
	case "v1 Service":
		return strictAppend(js, &o.Services)
	case "v1 ServiceAccount":
		return strictAppend(js, &o.ServiceAccounts)
	case "policy/v1 PodDisruptionBudget":
		return strictAppend(js, &o.PDBs)
	case "batch/v1 Job":
		return strictAppend(js, &o.Jobs)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return strictAppend(js, &o.ServiceMonitors)
	case "monitoring.coreos.com/v1 PodMonitor":
		return strictAppend(js, &o.PodMonitors)
	}
	return fmt.Errorf("an object of kind %s %s, which the tests do not know", meta.APIVersion, meta.Kind)
}

// strictAppend decodes js into a new T, refusing fields T does not have.
func strictAppend[T any](js []byte, to *[]T) error {
	var v T
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		return err
	}
	*to = append(*to, v)
	return nil
}

// examples are the documented values files.
func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values examples in %s/examples (%v)", chartDir, err)
	}
	return files
}
