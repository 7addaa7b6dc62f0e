package demo

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/debi-scaler/debi/trace"
)

// parsed is the OpenMetrics text read back: each series' samples by timestamp (ms), and each
// family's type. promtool reads the text for real in cmd/debi's TestDemoWhatIf; this reader
// checks the shape the tests below need: a family's TYPE before its samples, no family twice,
// every sample with a value and a timestamp in seconds, # EOF last.
type parsed struct {
	samples map[string]map[int64]float64 // series (name and labels, as written) → ts → value
	order   map[string][]int64           // series → timestamps in file order
	types   map[string]string
}

func parse(t *testing.T, b []byte) parsed {
	t.Helper()
	if !bytes.HasSuffix(b, []byte("\n# EOF\n")) {
		t.Fatalf("the text does not end with # EOF: …%s", b[max(0, len(b)-80):])
	}
	out := parsed{samples: map[string]map[int64]float64{}, order: map[string][]int64{}, types: map[string]string{}}
	family := ""
	lines := strings.Split(strings.TrimSuffix(string(b), "\n# EOF\n"), "\n")
	for n, line := range lines {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			if _, dup := out.types[name]; dup {
				t.Fatalf("line %d: family %s twice", n+1, name)
			}
			out.types[name], family = typ, name
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		i := strings.LastIndex(line, "} ")
		if i < 0 || family == "" || !strings.HasPrefix(line, family) {
			t.Fatalf("line %d: %q is not a sample of family %s", n+1, line, family)
		}
		fields := strings.Fields(line[i+2:])
		if len(fields) != 2 {
			t.Fatalf("line %d: %q: want a value and a timestamp", n+1, line)
		}
		v, err1 := strconv.ParseFloat(fields[0], 64)
		ts, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %d: %q: %v %v", n+1, line, err1, err2)
		}
		k := line[:i+1]
		if out.samples[k] == nil {
			out.samples[k] = map[int64]float64{}
		}
		out.samples[k][ts*1000] = v
		out.order[k] = append(out.order[k], ts*1000)
	}
	return out
}

// stepTrace is 24 five-minute samples in cores: 1 core for 2 hours, then 4 (the HPA scales up).
func stepTrace() trace.Trace {
	tr := trace.Trace{Name: "step", StepMinutes: 5}
	for k := range 24 {
		v := 1.0
		if k >= 12 {
			v = 4
		}
		tr.Values = append(tr.Values, v)
	}
	return tr
}

// TestOpenMetrics: Prometheus' parser reads the text back; every series has a sample every 30 s
// from Start to End; the counters never fall; at each trace sample's time the pods' counters
// give back the trace's value as rate() computes it; the replica counts are the HPA's, which
// scaled up on the step; every pod has the request and the owner chain.
func TestOpenMetrics(t *testing.T) {
	o := DefaultOptions()
	o.Sim.Scale = 1 // trace values are cores
	o.End = time.Date(2026, 12, 1, 12, 3, 0, 0, time.UTC)
	o.Range = 0
	tr := stepTrace()
	d, err := Build(context.Background(), tr, o)
	if err != nil {
		t.Fatal(err)
	}
	// End truncated to the 5-minute step; 24 samples, the first one's step starting 2 h before.
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if !d.End.Equal(end) || !d.Start.Equal(end.Add(-24*5*time.Minute)) {
		t.Fatalf("from %v to %v, want %v to %v", d.Start, d.End, end.Add(-2*time.Hour), end)
	}
	var b bytes.Buffer
	if err := d.WriteOpenMetrics(&b); err != nil {
		t.Fatal(err)
	}
	p := parse(t, b.Bytes())
	for name, want := range map[string]string{"container_cpu_usage_seconds": "counter", "kube_pod_container_resource_requests": "gauge",
		"kube_pod_owner": "gauge", "kube_replicaset_owner": "gauge", "kube_deployment_spec_replicas": "gauge", "kube_deployment_status_replicas_ready": "gauge",
		"kube_pod_created": "gauge", "kube_pod_status_ready_time": "gauge"} {
		if p.types[name] != want {
			t.Errorf("family %s: type %q, want %q", name, p.types[name], want)
		}
	}
	// The HPA at 0.6 of 0.5 cores: 1 core needs ceil(1/0.3) = 4 pods, 4 cores ceil(4/0.3) = 14.
	if d.Pods != 14 {
		t.Errorf("%d pods, want 14 (4 cores at 0.6 × 0.5)", d.Pods)
	}
	// The HPA's 10 pods started on the step: each a pod of its own, with its creation, its
	// readiness a start-up delay later and its owner, from its creation to 5 minutes after it
	// was Ready.
	starts := d.Startups()
	if len(starts) != 10 {
		t.Fatalf("%d start-ups, want the 10 pods the HPA added", len(starts))
	}
	startup := map[string]bool{}
	for _, st := range starts {
		if got := st.Ready.Sub(st.Created); got != o.Sim.StartupDelay {
			t.Errorf("pod %s: ready %v after its creation, want the start-up delay %v", st.Pod, got, o.Sim.StartupDelay)
		}
		labels := `{namespace="demo",pod="` + st.Pod + `",uid="` + st.UID + `"}`
		created, ready := p.order["kube_pod_created"+labels], p.order["kube_pod_status_ready_time"+labels]
		own := `kube_pod_owner{namespace="demo",owner_is_controller="true",owner_kind="ReplicaSet",owner_name="web-7c9f6d8b5",pod="` + st.Pod + `"}`
		// On the 30 s scrapes: the first at or after each event, the last at or before the end.
		const scrape = 30000
		up := func(t time.Time) int64 { return (t.UnixMilli() + scrape - 1) / scrape * scrape }
		last := st.Ready.Add(startupLinger).UnixMilli() / scrape * scrape
		switch {
		case len(created) == 0 || created[0] != up(st.Created) || created[len(created)-1] != last:
			t.Errorf("pod %s: kube_pod_created at %v, want from %v to %v", st.Pod, created, up(st.Created), last)
		case len(ready) == 0 || ready[0] != up(st.Ready) || ready[len(ready)-1] != last:
			t.Errorf("pod %s: kube_pod_status_ready_time at %v, want from %v to %v", st.Pod, ready, up(st.Ready), last)
		case p.samples["kube_pod_created"+labels][created[0]] != float64(st.Created.Unix()) || p.samples["kube_pod_status_ready_time"+labels][last] != float64(st.Ready.Unix()):
			t.Errorf("pod %s: created %v, ready %v; want %v, %v", st.Pod, p.samples["kube_pod_created"+labels][created[0]], p.samples["kube_pod_status_ready_time"+labels][last], st.Created.Unix(), st.Ready.Unix())
		case len(p.order[own]) != len(created):
			t.Errorf("pod %s: %d owner samples, %d of its creation", st.Pod, len(p.order[own]), len(created))
		}
		startup["kube_pod_created"+labels], startup["kube_pod_status_ready_time"+labels], startup[own] = true, true, true
	}
	// 3 series per serving pod, the ReplicaSet's owner, the two replica counts; 3 per started pod.
	if len(p.samples) != 3*d.Pods+3+3*len(starts) {
		t.Errorf("%d series, want %d", len(p.samples), 3*d.Pods+3+3*len(starts))
	}
	points := int(d.End.Sub(d.Start)/(30*time.Second)) + 1
	var counters []string
	for k, ts := range p.order {
		if startup[k] {
			continue
		}
		if len(ts) != points || ts[0] != d.Start.UnixMilli() || ts[len(ts)-1] != d.End.UnixMilli() {
			t.Fatalf("%s: %d samples from %d to %d, want %d from %v to %v", k, len(ts), ts[0], ts[len(ts)-1], points, d.Start, d.End)
		}
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] != 30000 {
				t.Fatalf("%s: samples %d ms apart at %d", k, ts[i]-ts[i-1], ts[i])
			}
		}
		if !strings.HasPrefix(k, "container_cpu_usage_seconds_total{") {
			continue
		}
		counters = append(counters, k)
		for i := 1; i < len(ts); i++ {
			if p.samples[k][ts[i]] < p.samples[k][ts[i-1]] {
				t.Fatalf("%s falls at %d", k, ts[i])
			}
		}
		if !strings.Contains(k, `namespace="demo"`) || !strings.Contains(k, `container="app"`) || !strings.Contains(k, `image="`) {
			t.Errorf("%s lacks a label the demand query reads", k)
		}
	}
	if len(counters) != d.Pods {
		t.Fatalf("%d counters, want one per pod (%d)", len(counters), d.Pods)
	}
	sawUp := false
	for k := 1; k <= 24; k++ {
		at := d.Start.Add(time.Duration(k) * 5 * time.Minute)
		ms := at.UnixMilli()
		// rate(...[1m]) at a sample's time, 30 s scrape: the increase since the sample 30 s
		// before over 30 s (extrapolated to the minute, the same slope), summed over the pods.
		var sum float64
		for _, c := range counters {
			sum += (p.samples[c][ms] - p.samples[c][ms-30000]) / 30
		}
		if want := tr.Values[k-1]; math.Abs(sum-want) > 1e-9 {
			t.Errorf("demand read back at %v: %v, want the trace's %v", at, sum, want)
		}
		dem, reps, ready, ok := d.At(at)
		if !ok || dem != tr.Values[k-1] {
			t.Errorf("At(%v) = %v, %v; want %v", at, dem, ok, tr.Values[k-1])
		}
		spec := p.samples[`kube_deployment_spec_replicas{deployment="web",namespace="demo"}`][ms]
		rd := p.samples[`kube_deployment_status_replicas_ready{deployment="web",namespace="demo"}`][ms]
		if spec != float64(reps) || rd != float64(ready) {
			t.Errorf("replicas at %v: spec %v ready %v, want the HPA's %d, %d", at, spec, rd, reps, ready)
		}
		if k <= 12 && reps != 4 {
			t.Errorf("replicas at %v: %d, want 4 on 1 core", at, reps)
		}
		if k == 24 && reps != 14 {
			t.Errorf("replicas at the end: %d, want 14 on 4 cores", reps)
		}
	}
	specs := p.samples[`kube_deployment_spec_replicas{deployment="web",namespace="demo"}`]
	for ts, ready := range p.samples[`kube_deployment_status_replicas_ready{deployment="web",namespace="demo"}`] {
		sawUp = sawUp || ready < specs[ts]
	}
	if !sawUp {
		t.Error("no sample has pods starting (ready below spec) after the step up: the start-up delay is not modelled")
	}
	if _, _, _, ok := d.At(d.End.Add(5 * time.Minute)); ok {
		t.Error("At after End is ok")
	}
	for _, pod := range counters {
		name := pod[strings.Index(pod, `pod="`)+5:]
		name = name[:strings.Index(name, `"`)]
		req := `kube_pod_container_resource_requests{container="app",namespace="demo",node="demo",pod="` + name + `",resource="cpu",unit="core"}`
		own := `kube_pod_owner{namespace="demo",owner_is_controller="true",owner_kind="ReplicaSet",owner_name="web-7c9f6d8b5",pod="` + name + `"}`
		if p.samples[req][d.End.UnixMilli()] != 0.5 || p.samples[own][d.End.UnixMilli()] != 1 {
			t.Errorf("pod %s: request %v, owner %v; want 0.5, 1", name, p.samples[req][d.End.UnixMilli()], p.samples[own][d.End.UnixMilli()])
		}
	}
}

// TestStartupsVary: with --startup-spread the pods the HPA starts are Ready no sooner than the
// start-up delay, some of them later, as the series say.
func TestStartupsVary(t *testing.T) {
	o := DefaultOptions()
	o.Sim.Scale, o.Range, o.Sim.StartupSpread = 1, 0, time.Minute
	o.End = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d, err := Build(context.Background(), stepTrace(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := d.WriteOpenMetrics(&b); err != nil {
		t.Fatal(err)
	}
	p := parse(t, b.Bytes())
	later := 0
	starts := d.Startups()
	for _, st := range starts {
		up := st.Ready.Sub(st.Created)
		if up < o.Sim.StartupDelay {
			t.Errorf("pod %s ready %v after its creation, under the start-up delay", st.Pod, up)
		}
		if up > o.Sim.StartupDelay {
			later++
		}
		ready := `kube_pod_status_ready_time{namespace="demo",pod="` + st.Pod + `",uid="` + st.UID + `"}`
		if ts := p.order[ready]; len(ts) == 0 || p.samples[ready][ts[0]] != float64(st.Ready.Unix()) {
			t.Errorf("pod %s: kube_pod_status_ready_time %v, want %d", st.Pod, p.samples[ready], st.Ready.Unix())
		}
	}
	if len(starts) == 0 || later == 0 {
		t.Fatalf("%d start-ups, %d of them longer than the delay: the spread does not show", len(starts), later)
	}
}

// TestRange: a range shorter than the trace writes its end, from one step before the range (the
// rate's window at its first point); the HPA ran over the whole trace all the same.
func TestRange(t *testing.T) {
	o := DefaultOptions()
	o.Sim.Scale = 1
	o.End = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	o.Range = 30 * time.Minute
	d, err := Build(context.Background(), stepTrace(), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := o.End.Add(-35 * time.Minute); !d.Start.Equal(want) {
		t.Errorf("start %v, want %v", d.Start, want)
	}
	if d.Pods != 14 {
		t.Errorf("%d pods over the last 35 minutes, want 14", d.Pods)
	}
}

// TestBuildErrors: each bad input is refused, naming what to change.
func TestBuildErrors(t *testing.T) {
	multi := stepTrace()
	multi.Metrics, multi.Columns = []string{"cpu", "rps"}, [][]float64{multi.Values, multi.Values}
	idle := trace.Trace{Name: "idle", StepMinutes: 5, Values: []float64{0, 0, 0}}
	for _, c := range []struct {
		name string
		tr   trace.Trace
		mod  func(*Options)
		want string
	}{
		{"several metrics", multi, nil, "has 2 metrics"},
		{"idle trace", idle, func(o *Options) { o.Sim.Scale = 0 }, "set --scale"},
		{"no samples", trace.Trace{Name: "empty", StepMinutes: 5}, nil, "no samples"},
		{"scrape 45s", stepTrace(), func(o *Options) { o.ScrapeInterval = 45 * time.Second }, "scrape-interval: must be a multiple"},
		{"scrape 20s", stepTrace(), func(o *Options) { o.ScrapeInterval = 20 * time.Second }, "scrape-interval"},
		{"negative range", stepTrace(), func(o *Options) { o.Range = -time.Hour }, "range: must not be negative"},
		{"no namespace", stepTrace(), func(o *Options) { o.Namespace = "" }, "namespace"},
		{"max below min", stepTrace(), func(o *Options) { o.Sim.Params.MinReplicas = 5; o.Sim.Params.MaxReplicas = 2 }, "max_replicas"},
		{"request", stepTrace(), func(o *Options) { o.Sim.Request = 0 }, "request: must be a positive"},
		{"negative spread", stepTrace(), func(o *Options) { o.Sim.StartupSpread = -time.Second }, "startup-spread: must not be negative"},
		{"negative delay", stepTrace(), func(o *Options) { o.Sim.StartupDelay = -time.Second }, "startup-delay: must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Sim.Scale = 1
			if c.mod != nil {
				c.mod(&o)
			}
			_, err := Build(context.Background(), c.tr, o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
