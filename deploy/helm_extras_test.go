package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// extrasValues sets every escape hatch of the exporter and the webhook.
const extrasValues = `
exporter:
  podAnnotations: {example.com/scrape-note: exporter}
  podLabels: {team: platform}
  priorityClassName: system-cluster-critical
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
  serviceAccount:
    annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/debi"}
  extraVolumes:
    - {name: ca, configMap: {name: corp-ca}}
  extraVolumeMounts:
    - {name: ca, mountPath: /etc/ssl/corp, readOnly: true}
webhook:
  podAnnotations: {example.com/scrape-note: webhook}
  podLabels: {team: platform}
  priorityClassName: high
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
  serviceAccount:
    annotations: {iam.gke.io/gcp-service-account: debi@project.iam.gserviceaccount.com}
  extraVolumes:
    - {name: ca, secret: {secretName: corp-ca}}
  extraVolumeMounts:
    - {name: ca, mountPath: /etc/ssl/corp, readOnly: true}
tidalController:
  enabled: true
  namespaces: [shop]
  podAnnotations: {example.com/scrape-note: tidal-controller}
  podLabels: {team: platform}
  priorityClassName: low
  topologySpreadConstraints:
    - {maxSkew: 2, topologyKey: kubernetes.io/os, whenUnsatisfiable: ScheduleAnyway}
  serviceAccount:
    annotations: {azure.workload.identity/client-id: 00000000-0000-0000-0000-000000000000}
  extraVolumes:
    - {name: ca, configMap: {name: corp-ca}}
  extraVolumeMounts:
    - {name: ca, mountPath: /etc/ssl/corp, readOnly: true}
preflight:
  podLabels: {team: platform}
`

// TestHelmEscapeHatches renders the chart with every escape hatch set and finds each where it
// belongs — pod annotations and labels on the pod template (not in the selector), the priority
// class and spread constraints in the pod spec, the ServiceAccount's annotations, the extra
// volume and its mount — and none of them with the defaults.
func TestHelmEscapeHatches(t *testing.T) {
	bin := helmBin(t)
	values := writeValues(t, extrasValues)
	helm(t, bin, "lint", "--strict", chart, "--values", values)
	objs := helmTemplate(t, bin, "debi", "--values", values)
	defaults := helmTemplate(t, bin, "debi")
	for _, tc := range []struct {
		component, priority, topologyKey, saKey, volumeFrom string
	}{
		{"exporter", "system-cluster-critical", "topology.kubernetes.io/zone", "eks.amazonaws.com/role-arn", "configMap"},
		{"webhook", "high", "kubernetes.io/hostname", "iam.gke.io/gcp-service-account", "secret"},
		{"tidal-controller", "low", "kubernetes.io/os", "azure.workload.identity/client-id", "configMap"},
	} {
		t.Run(tc.component, func(t *testing.T) {
			name := "debi-" + tc.component
			d := find(objs, "Deployment", name)
			if d == nil {
				t.Fatalf("no Deployment %s", name)
			}
			tmpl := func(path ...string) any {
				v, _, _ := unstructured.NestedFieldNoCopy(d.Object, append([]string{"spec", "template"}, path...)...)
				return v
			}
			// Beside checksum/config where there is a configuration (not the tidal controller's).
			if a, _ := tmpl("metadata", "annotations").(map[string]any); a["example.com/scrape-note"] != tc.component ||
				(a["checksum/config"] == nil) != (tc.component == "tidal-controller") {
				t.Errorf("pod annotations %v: want the value's (beside checksum/config)", a)
			}
			if l, _ := tmpl("metadata", "labels").(map[string]any); l["team"] != "platform" || l["app.kubernetes.io/component"] != tc.component {
				t.Errorf("pod labels %v", l)
			}
			if sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels"); sel["team"] != "" {
				t.Errorf("podLabels in the selector %v: an immutable field would change", sel)
			}
			if p := tmpl("spec", "priorityClassName"); p != tc.priority {
				t.Errorf("priorityClassName %v, want %s", p, tc.priority)
			}
			if c, _ := tmpl("spec", "topologySpreadConstraints").([]any); len(c) != 1 || c[0].(map[string]any)["topologyKey"] != tc.topologyKey {
				t.Errorf("topologySpreadConstraints %v", c)
			}
			vols, _ := tmpl("spec", "volumes").([]any)
			if len(vols) == 0 {
				t.Fatal("no volumes")
			}
			if last := vols[len(vols)-1].(map[string]any); last["name"] != "ca" || last[tc.volumeFrom] == nil ||
				tc.component != "tidal-controller" && vols[0].(map[string]any)["name"] != "config" {
				t.Errorf("volumes %v: want config first (but for the tidal controller, which has none) and the extra volume after", vols)
			}
			mounts, _ := tmpl("spec", "containers").([]any)[0].(map[string]any)["volumeMounts"].([]any)
			if len(mounts) == 0 {
				t.Fatal("no volumeMounts")
			}
			if last := mounts[len(mounts)-1].(map[string]any); last["mountPath"] != "/etc/ssl/corp" {
				t.Errorf("volumeMounts %v", mounts)
			}
			sa := find(objs, "ServiceAccount", name)
			if sa == nil || sa.GetAnnotations()[tc.saKey] == "" {
				t.Errorf("ServiceAccount %s annotations %v, want %s", name, sa.GetAnnotations(), tc.saKey)
			}
			// The defaults render none of it.
			if tc.component == "tidal-controller" {
				return // not rendered by default
			}
			dd := find(defaults, "Deployment", name)
			for _, path := range [][]string{{"priorityClassName"}, {"topologySpreadConstraints"}} {
				if v, ok, _ := unstructured.NestedFieldNoCopy(dd.Object, append([]string{"spec", "template", "spec"}, path...)...); ok {
					t.Errorf("defaults render %v = %v", path, v)
				}
			}
			if a := find(defaults, "ServiceAccount", name).GetAnnotations(); len(a) != 0 {
				t.Errorf("defaults annotate the ServiceAccount: %v", a)
			}
		})
	}
	for _, tc := range []struct{ set, want string }{
		{`exporter.topologySpreadConstraints=[{"maxSkew":1}]`, "topologyKey"},
		{`webhook.extraVolumeMounts=[{"name":"x"}]`, "mountPath"},
		{`webhook.serviceAccount.name="x"`, "name"},
		{`exporter.podLabels={"team":1}`, "/exporter/podLabels/team"},
	} {
		if out, err := helmErr(bin, "template", "debi", chart, "--set-json", tc.set); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set-json %s: err %v, want a schema error naming %s\n%s", tc.set, err, tc.want, out)
		}
	}
}

// TestHelmPreflight: the chart's pre-install and pre-upgrade hook runs `debi check config` on
// the configuration the release's ConfigMap gets. The test runs the Job's own command with a
// real debi on the hook ConfigMap's debi.yml: a good configuration passes; a bad one (an unknown
// algorithm, a min_replicas above max_replicas, which the values schema cannot see) fails with
// every bad field named, so helm install fails before anything rolls out. preflight.enabled:
// false renders no hook.
func TestHelmPreflight(t *testing.T) {
	bin := helmBin(t)
	debi := filepath.Join(t.TempDir(), "debi")
	build := exec.Command("go", "build", "-o", debi, "./cmd/debi")
	build.Dir = ".."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/debi: %v\n%s", err, b)
	}
	// run renders the chart with values and runs the hook Job's command on its ConfigMap.
	run := func(values string) (string, error) {
		objs, hooks := helmObjectsAndHooks(t, bin, "debi", "--values", writeValues(t, values))
		job, cm := find(hooks, "Job", "debi-preflight"), find(hooks, "ConfigMap", "debi-preflight")
		if job == nil || cm == nil {
			t.Fatalf("hooks %v: want Job and ConfigMap debi-preflight", inventory(hooks))
		}
		for _, h := range []*unstructured.Unstructured{job, cm} {
			a := h.GetAnnotations()
			if a["helm.sh/hook"] != "pre-install,pre-upgrade" || !strings.Contains(a["helm.sh/hook-delete-policy"], "hook-succeeded") {
				t.Errorf("%s %s annotations %v", h.GetKind(), h.GetName(), a)
			}
		}
		cw, _ := strconv.Atoi(cm.GetAnnotations()["helm.sh/hook-weight"])
		jw, _ := strconv.Atoi(job.GetAnnotations()["helm.sh/hook-weight"])
		if cw >= jw {
			t.Errorf("the ConfigMap (weight %d) must be created before the Job (weight %d)", cw, jw)
		}
		cfg, _, _ := unstructured.NestedString(cm.Object, "data", "debi.yml")
		want, _, _ := unstructured.NestedString(find(objs, "ConfigMap", "debi-config").Object, "data", "debi.yml")
		if cfg != want || cfg == "" {
			t.Fatalf("the hook checks another configuration than the release's:\n%s\n---\n%s", cfg, want)
		}
		if v, _, _ := unstructured.NestedBool(job.Object, "spec", "template", "spec", "automountServiceAccountToken"); v {
			t.Error("the pre-flight Job mounts a token")
		}
		c := job.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		args := c["args"].([]any)
		var argv []string
		dir := t.TempDir()
		for _, a := range args {
			s := a.(string)
			if strings.HasPrefix(s, "/etc/debi/") { // the ConfigMap's mount
				s = filepath.Join(dir, strings.TrimPrefix(s, "/etc/debi/"))
			}
			argv = append(argv, s)
		}
		if !reflect.DeepEqual(argv[:2], []string{"check", "config"}) {
			t.Fatalf("the Job runs %v, want debi check config", args)
		}
		if err := os.WriteFile(filepath.Join(dir, "debi.yml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(debi, argv...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("{}"); err != nil {
		t.Errorf("the defaults fail the pre-flight check: %v\n%s", err, out)
	}
	if out, err := run("config: {policies: [{name: web, target: {namespace: shop, name: web}, algorithm: budget}]}"); err != nil {
		t.Errorf("a good policy fails the pre-flight check: %v\n%s", err, out)
	}
	out, err := run("config: {policies: [{name: web, target: {namespace: shop, name: web}, algorithm: crystalball, scaling: {min_replicas: 9, max_replicas: 3}}]}")
	if err == nil {
		t.Fatalf("a bad configuration passes the pre-flight check:\n%s", out)
	}
	for _, want := range []string{"policies[0].algorithm", `unknown policy "crystalball"`, "policies[0].scaling"} {
		if !strings.Contains(out, want) {
			t.Errorf("the pre-flight check's output lacks %q:\n%s", want, out)
		}
	}
	if hooks := helmHooks(t, bin, "debi", "--set", "preflight.enabled=false"); len(hooks) != 0 {
		t.Errorf("preflight.enabled=false renders %v", inventory(hooks))
	}
}

// TestHelmPreflightScheduling: the pre-flight Job's pod takes its own nodeSelector,
// tolerations, affinity and priorityClassName (a cluster whose nodes are all tainted would
// otherwise leave it Pending until activeDeadlineSeconds fails the install); the defaults
// render none of them, and the schema rejects a wrong type.
func TestHelmPreflightScheduling(t *testing.T) {
	bin := helmBin(t)
	podSpec := func(hooks []*unstructured.Unstructured) map[string]any {
		t.Helper()
		job := find(hooks, "Job", "debi-preflight")
		if job == nil {
			t.Fatalf("hooks %v: no Job debi-preflight", inventory(hooks))
		}
		s, _, _ := unstructured.NestedMap(job.Object, "spec", "template", "spec")
		return s
	}
	values := writeValues(t, `
preflight:
  nodeSelector: {node-role.example.com/system: "true"}
  tolerations:
    - {key: dedicated, operator: Equal, value: system, effect: NoSchedule}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
  priorityClassName: system-cluster-critical
`)
	helm(t, bin, "lint", "--strict", chart, "--values", values)
	spec := podSpec(helmHooks(t, bin, "debi", "--values", values))
	if got := toString(spec["nodeSelector"]); got != "map[node-role.example.com/system:true]" {
		t.Errorf("nodeSelector %s", got)
	}
	if got := toString(spec["tolerations"]); got != "[map[effect:NoSchedule key:dedicated operator:Equal value:system]]" {
		t.Errorf("tolerations %s", got)
	}
	if got, _, _ := unstructured.NestedSlice(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"); len(got) != 1 {
		t.Errorf("affinity %v", spec["affinity"])
	}
	if spec["priorityClassName"] != "system-cluster-critical" {
		t.Errorf("priorityClassName %v", spec["priorityClassName"])
	}

	defaults := podSpec(helmHooks(t, bin, "debi"))
	for _, k := range []string{"nodeSelector", "tolerations", "affinity", "priorityClassName"} {
		if v, ok := defaults[k]; ok {
			t.Errorf("the defaults render %s = %v", k, v)
		}
	}
	for _, tc := range []struct{ set, want string }{
		{`preflight.nodeSelector={"a":1}`, "/preflight/nodeSelector/a"},
		{`preflight.tolerations={"key":"x"}`, "/preflight/tolerations"},
		{`preflight.priorityClassName=1`, "/preflight/priorityClassName"},
	} {
		if out, err := helmErr(bin, "template", "debi", chart, "--set-json", tc.set); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set-json %s: err %v, want a schema error naming %s\n%s", tc.set, err, tc.want, out)
		}
	}
}
