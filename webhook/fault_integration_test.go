package webhook

// Fault-injection tests against the real kube-apiserver: a fault proxy (faultproxy_test.go) in
// front of it answers the webhook's writes with 409, 429, 500 or holds them past the decision
// timeout, and a dedicated kube-apiserver is stopped and restarted under a running Controller.
// Every test audits the target's whole replica history, as a watch saw it from the start.
//
//	DEBI_K8S_ASSETS=$(hack/k8s-env.sh build) go test ./webhook/ -run 'TestFault|TestAPIServerRestart' -v

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/internal/testenv"
)

// faultTimeout is the decision timeout of the fault tests: short, so that the latency case
// is quick.
const faultTimeout = 2 * time.Second

// faultConfig has one debi policy, web, in act mode. W is the utilization at the current size
// (load_replicas: none), so the right count depends on the size the decision read:
// B = (0.7−0.3)·2 = 0.8, and out of the tolerance band n = round((W·N + B)/0.7).
func faultConfig(t testing.TB, ns string, timeout time.Duration) *config.Config {
	return faultConfigQueries(t, ns, timeout, "{load_replicas: none}")
}

// faultConfigQueries is faultConfig with other webhook.queries.
func faultConfigQueries(t testing.TB, ns string, timeout time.Duration, queries string) *config.Config {
	return testConfig(t, fmt.Sprintf(`
policies:
  - name: web
    target: {namespace: %s, name: web}
    algorithm: debi
    model: naive
    request: 1
    scaling: {min_replicas: 2, max_replicas: 20, lower: 0.3, upper: 0.7, tolerance: 0.1, window: 0s}
webhook:
  mode: act
  allow_unauthenticated: true
  decision_timeout: %s
  queries: %s
`, ns, timeout, queries))
}

// TestFaultProxy drives Controller.Alerts through a KubeActuator whose every request goes through
// the fault proxy, against a Deployment web at 4 replicas with W = 0.9 at the current size:
// from 4, L = 3.6 and round((3.6+0.8)/0.7) = round(6.29) = 6. Each case checks the status code
// Alertmanager would get, the writes that reached the API server, and the Deployment's whole
// replica history (watched from the start, and again a while after the answer: no late write).
func TestFaultProxy(t *testing.T) {
	base := newKubeEnv(t)
	type env struct {
		*kubeEnv
		p *faultProxy
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, e env)
		// code is errorCode of Alerts' error, 0 for none.
		code int
		// puts is how many PUT …/scale reached the API server.
		puts    int
		history []int32
		check   func(t *testing.T, out Outcome)
		// settle is how long to watch for late writes after the answer.
		settle time.Duration
		// basis: W is the exporter's utilization at 4 replicas (queries.load_replicas), not at
		// the current size, so that a repeat is idempotent.
		basis bool
		// retry: Alertmanager's retry (the faults cleared) must answer 200 and write nothing.
		retry bool
		// codes, when set, are the acceptable codes instead of code.
		codes []int
		// timeout is the decision timeout (default faultTimeout).
		timeout time.Duration
		// starve: the actuator's clients share a real client-go token bucket (0.1/s), which the
		// test empties between the read and the write.
		starve bool
	}{{
		// Someone else scales web to 8 between the webhook's read and its write: the webhook
		// reads 8 and decides from it: W = 0.9 at 8, L = 7.2, U(8) = 0.6, |0.9/0.6 − 1| = 0.5 >
		// 0.1, round((7.2+0.8)/0.7) = round(11.43) = 11. The 6 computed from 4 never lands.
		name: "409 once, resized by another writer in between: decided again from the new size",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", 1, conflictFault(e.p, func(*http.Request) {
				s, err := e.Kube.AppsV1().Deployments(e.NS).GetScale(context.Background(), "web", metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				s.Spec.Replicas = 8
				if _, err := e.Kube.AppsV1().Deployments(e.NS).UpdateScale(context.Background(), "web", s, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			}))
		},
		puts: 1, history: []int32{4, 8, 11},
		check: func(t *testing.T, out Outcome) {
			if out.Before != 8 || out.After != 11 || !out.Written || out.Conflicts != 1 {
				t.Errorf("outcome %+v, want 8 -> 11 written after 1 conflict", out)
			}
		},
	}, {
		// Its owner pauses web between the read and the write: the second round reads the
		// annotation and holds.
		name: "409 once, paused in between: the new read holds",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", 1, conflictFault(e.p, func(*http.Request) {
				d, err := e.Kube.AppsV1().Deployments(e.NS).Get(context.Background(), "web", metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				d.Annotations = map[string]string{AnnotationPaused: "true"}
				if _, err := e.Kube.AppsV1().Deployments(e.NS).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
			}))
		},
		puts: 0, history: []int32{4},
		check: func(t *testing.T, out Outcome) {
			if out.Held == "" || out.Written || out.After != 4 || out.Conflicts != 1 {
				t.Errorf("outcome %+v, want held at 4 after 1 conflict", out)
			}
		},
	}, {
		name: "409 forever: 503 after 5 rounds, nothing written",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, conflictFault(e.p, nil))
		},
		code: http.StatusServiceUnavailable, puts: 0, history: []int32{4},
		check: func(t *testing.T, out Outcome) {
			if out.Written || out.Conflicts != maxDecideAttempts {
				t.Errorf("outcome %+v, want nothing written, %d conflicts", out, maxDecideAttempts)
			}
		},
	}, {
		// client-go honours Retry-After within the decision: one 429 costs 1 s, then the
		// write lands.
		name: "429 once: client-go waits Retry-After, the write lands",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", 1, tooManyRequestsFault(e.p))
		},
		puts: 1, history: []int32{4, 6},
	}, {
		// client-go waits Retry-After between tries (at 0, 1 and 2 s) until the decision's
		// deadline (2.5 s): the answer is throttled (503) or out of time (504), a retry either
		// way. (With a deadline on a Retry-After boundary, 2 s, client-go's rate limiter may
		// answer "would exceed context deadline" instead: see the next case.)
		name: "429 persisting: 503 or 504, nothing written",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, tooManyRequestsFault(e.p))
		},
		codes: []int{http.StatusServiceUnavailable, http.StatusGatewayTimeout}, puts: 0, history: []int32{4},
		timeout: faultTimeout + faultTimeout/4,
	}, {
		// The webhook's own client-side rate limiter cannot grant the write before the
		// decision's deadline: x/time/rate fails at once with "would exceed context deadline",
		// which client-go wraps without context.DeadlineExceeded. It is a timeout (504; 503
		// would do), not an unexpected error (500).
		name:   "client-side throttling past the deadline: 504, nothing written",
		setup:  func(t *testing.T, e env) {},
		starve: true,
		codes:  []int{http.StatusGatewayTimeout, http.StatusServiceUnavailable}, puts: 0, history: []int32{4},
	}, {
		name: "500: 500, nothing written",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, internalErrorFault(e.p))
		},
		code: http.StatusInternalServerError, puts: 0, history: []int32{4},
	}, {
		// The proxy holds the write past the decision timeout: 504, and the write, cancelled
		// with the decision, never lands.
		name: "latency above the decision timeout: 504, no write after the answer",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, latencyFault(e.p, faultTimeout+2*time.Second))
		},
		code: http.StatusGatewayTimeout, puts: 0, history: []int32{4}, settle: faultTimeout + 3*time.Second,
	}, {
		// The write lands but its answer comes after the decision timeout: 504, Alertmanager
		// retries, and the retry, reading 6, writes nothing: W = 0.9·4/6 = 0.6, |0.6/U(6) − 1| =
		// |0.6/0.567 − 1| = 0.059 ≤ 0.1.
		name: "answer of a landed write held past the decision timeout: 504, the retry writes nothing",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, slowResponseFault(e.p, "/scale", faultTimeout+2*time.Second))
		},
		code: http.StatusGatewayTimeout, puts: 1, history: []int32{4, 6}, settle: faultTimeout + 3*time.Second,
		basis: true, retry: true,
	}, {
		// Latency below the timeout only delays.
		name: "latency below the decision timeout: written",
		setup: func(t *testing.T, e env) {
			e.p.inject(http.MethodPut, "/scale", -1, latencyFault(e.p, faultTimeout/4))
		},
		puts: 1, history: []int32{4, 6},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each in its own namespace, behind its own proxy
			e := env{kubeEnv: &kubeEnv{&testenv.KubeEnv{RC: base.RC, Kube: base.Kube, Dyn: base.Dyn}}}
			e.NS = e.Namespace(t, "debi-fault")
			e.Deployment(t, e.NS, "web", 4)
			h := testenv.WatchReplicas(t, e.Kube, e.NS)
			e.p = newFaultProxy(t, e.RC)
			rc := rest.CopyConfig(e.p.rc)
			var limiter flowcontrol.RateLimiter
			if tc.starve {
				limiter = flowcontrol.NewTokenBucketRateLimiter(0.1, 100)
				rc.RateLimiter = limiter
			}
			act, err := NewKubeActuator(rc)
			if err != nil {
				t.Fatal(err)
			}
			if tc.starve {
				act.beforeWrite = func(int) {
					for limiter.TryAccept() {
					}
				}
			}
			timeout := cmp.Or(tc.timeout, faultTimeout)
			cfg := faultConfig(t, e.NS, timeout)
			q := map[string]float64{qWebLoad: 0.9}
			if tc.basis {
				cfg = faultConfigQueries(t, e.NS, timeout, `{load_replicas: 'debi_load_replicas{policy="{{.Policy}}"}'}`)
				q[qWebReplicas] = 4
			}
			c, err := NewController(cfg, ControllerOptions{Actuator: act, Query: staticQuery(q), Logger: testenv.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, e)
			msg := mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web", "namespace", e.NS)}))
			start := time.Now()
			outs, err := c.Alerts(context.Background(), msg)
			took := time.Since(start)
			code := 0
			if err != nil {
				code = errorCode(err)
			}
			t.Logf("answered in %v: code %d, err %v", took.Round(time.Millisecond), code, err)
			want := tc.codes
			if want == nil {
				want = []int{tc.code}
			}
			if !slices.Contains(want, code) {
				t.Errorf("code %d (%v), want one of %v", code, err, want)
			}
			if len(outs) != 1 {
				t.Fatalf("outcomes %+v", outs)
			}
			if tc.check != nil {
				tc.check(t, outs[0])
			}
			atAnswer := h.Sync(t, "web")
			time.Sleep(max(tc.settle, 500*time.Millisecond))
			later := h.Sync(t, "web")
			if !slices.Equal(atAnswer, tc.history) || !slices.Equal(later, tc.history) {
				t.Errorf("replica history %v at the answer, %v later; want %v", atAnswer, later, tc.history)
			}
			if n := e.p.forwardedCount(http.MethodPut, "/scale"); n != tc.puts {
				t.Errorf("%d PUT …/scale reached the API server, want %d", n, tc.puts)
			}
			if tc.retry {
				e.p.clear()
				outs, err := c.Alerts(context.Background(), msg)
				if err != nil || len(outs) != 1 || outs[0].Written {
					t.Errorf("Alertmanager's retry: %+v, %v; want 200, nothing written", outs, err)
				}
				if got := h.Sync(t, "web"); !slices.Equal(got, tc.history) {
					t.Errorf("replica history after the retry %v, want %v", got, tc.history)
				}
			}
			t.Logf("proxy: %s", strings.Join(e.p.requests(), "; "))
		})
	}
}

// restartableAPIServer is a kube-apiserver + etcd of the test's own (hack/k8s-env.sh up in a
// temp state dir), whose kube-apiserver the test stops and starts again on the same port and
// certificates, with the same flags, while etcd keeps running.
type restartableAPIServer struct {
	state string
	rc    *rest.Config
	addr  string // host:port
	pid   int
	args  []string // of the kube-apiserver, as started
	dir   string   // its working directory (the flags name files relative to it)
	cmd   *exec.Cmd
	exit  chan struct{} // closed when cmd has been reaped
}

func startRestartableAPIServer(t *testing.T) *restartableAPIServer {
	t.Helper()
	assets := os.Getenv("DEBI_K8S_ASSETS")
	if assets == "" {
		testenv.SkipOrFail(t, "this test stops and restarts a kube-apiserver of its own: set DEBI_K8S_ASSETS (the dir hack/k8s-env.sh build prints)")
	}
	s := &restartableAPIServer{state: t.TempDir()}
	script := filepath.Join("..", "hack", "k8s-env.sh")
	env := append(os.Environ(), "KUBEBUILDER_ASSETS="+assets, "K8S_STATE="+s.state)
	down := func() {
		cmd := exec.Command(script, "down")
		cmd.Env = env
		_ = cmd.Run()
	}
	// The script picks free ports by probing them: another server starting at the same time
	// may take one first. Try again then.
	for attempt := 1; ; attempt++ {
		up := exec.Command(script, "up")
		up.Env = env
		out, err := up.CombinedOutput()
		if err == nil {
			break
		}
		down()
		if attempt == 3 {
			t.Fatalf("k8s-env.sh up: %v\n%s", err, out)
		}
		t.Logf("k8s-env.sh up failed (%v), trying again:\n%s", err, out)
	}
	t.Cleanup(down)
	// Runs before down, after the test's watches (registered later) have stopped: a restarted
	// kube-apiserver is our child, stopped and reaped here.
	t.Cleanup(func() {
		if s.cmd == nil {
			return
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exit:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exit
		}
		_ = os.Remove(filepath.Join(s.state, "apiserver.pid"))
	})
	b, err := os.ReadFile(filepath.Join(s.state, "apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if s.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.pid))
	if err != nil {
		t.Fatal(err)
	}
	s.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if s.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", s.pid)); err != nil {
		t.Fatal(err)
	}
	if s.rc, err = clientcmd.BuildConfigFromFlags("", filepath.Join(s.state, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	s.rc.QPS, s.rc.Burst = 200, 400
	u, err := url.Parse(s.rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = u.Host
	return s
}

// processGone reports whether pid has exited (a zombie counts: it is not reaped by us).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) S ...: the state follows the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// stopGrace is how long a stopped kube-apiserver may drain before SIGKILL. It stops listening at
// once on SIGTERM and exits in about a second, but an open watch keeps it draining for its 60 s
// shutdown timeout.
const stopGrace = 5 * time.Second

// stop sends SIGTERM to the kube-apiserver only (etcd keeps running), waits until its port
// refuses connections, and gives it stopGrace to exit before SIGKILL.
func (s *restartableAPIServer) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 20*time.Second, "the port to refuse connections", func() bool {
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	gone := func() bool {
		if s.cmd != nil {
			select {
			case <-s.exit:
				return true
			default:
				return false
			}
		}
		return processGone(s.pid)
	}
	deadline := time.Now().Add(stopGrace)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		t.Logf("kube-apiserver still draining %v after SIGTERM (open watches): SIGKILL", stopGrace)
		_ = syscall.Kill(s.pid, syscall.SIGKILL)
		testenv.Poll(t, 20*time.Second, "kube-apiserver to exit after SIGKILL", gone)
	}
}

// restart starts the kube-apiserver again with its flags and waits for /readyz.
func (s *restartableAPIServer) restart(t *testing.T) {
	t.Helper()
	logf, err := os.Create(filepath.Join(s.state, "apiserver-restarted.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.pid, s.exit = cmd, cmd.Process.Pid, make(chan struct{})
	exit := s.exit
	go func() { _ = cmd.Wait(); logf.Close(); close(exit) }()
	// down stops it by this pid; we reap it.
	_ = os.WriteFile(filepath.Join(s.state, "apiserver.pid"), []byte(strconv.Itoa(s.pid)), 0o600)
	kube := kubernetes.NewForConfigOrDie(s.rc)
	testenv.Poll(t, 90*time.Second, "the restarted kube-apiserver's /readyz", func() bool {
		_, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil
	})
}

// loadValues is a Prometheus whose answers the test changes; queries it does not hold answer as
// staticQuery does.
type loadValues struct {
	mu sync.Mutex
	m  map[string]float64
}

func (l *loadValues) set(expr string, v float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[expr] = v
}

func (l *loadValues) query(ctx context.Context, expr string) (float64, error) {
	l.mu.Lock()
	v, ok := l.m[expr]
	l.mu.Unlock()
	if ok {
		return v, nil
	}
	return staticQuery(nil)(ctx, expr)
}

// TestAPIServerRestart stops a dedicated kube-apiserver (SIGTERM, etcd kept) under a running
// Controller: every notification during the outage answers 5xx, so Alertmanager retries; once
// the server is back on the same port, the same Controller (not rebuilt) decides from the size
// it reads and writes it. The replica history, watched across the outage, is exactly
// 4 → 6 (before) → 11 (after):
//
//   - before: W 0.9 at 4, round((3.6+0.8)/0.7) = 6;
//   - after: W 1.2 at 6, L = 7.2, |1.2/U(6) − 1| = |1.2/0.567 − 1| > 0.1, round((7.2+0.8)/0.7) = 11.
func TestAPIServerRestart(t *testing.T) {
	s := startRestartableAPIServer(t)
	e := &kubeEnv{&testenv.KubeEnv{RC: s.rc, Kube: kubernetes.NewForConfigOrDie(s.rc), Dyn: dynamic.NewForConfigOrDie(s.rc)}}
	e.NS = e.Namespace(t, "debi-restart")
	e.Deployment(t, e.NS, "web", 4)
	h := testenv.WatchReplicas(t, e.Kube, e.NS)
	act, err := NewKubeActuator(rest.CopyConfig(s.rc))
	if err != nil {
		t.Fatal(err)
	}
	load := &loadValues{m: map[string]float64{qWebLoad: 0.9}}
	c, err := NewController(faultConfig(t, e.NS, 5*time.Second), ControllerOptions{Actuator: act, Query: load.query, Logger: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	msg := mustDecode(t, testenv.AMPayload("firing", map[string]any{"labels": testenv.AlertLabels("policy", "web", "namespace", e.NS)}))
	alert := func() (Outcome, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // as the router does
		defer cancel()
		outs, err := c.Alerts(ctx, msg)
		if len(outs) != 1 {
			t.Fatalf("outcomes %+v, %v", outs, err)
		}
		return outs[0], err
	}
	if out, err := alert(); err != nil || out.Before != 4 || out.After != 6 || !out.Written {
		t.Fatalf("before the outage: %+v, %v; want 4 -> 6 written", out, err)
	}

	h.Sync(t, "web") // the history is complete up to the outage
	h.Stop()         // an open watch would keep the old server draining for 60 s; resumed below
	t0 := time.Now()
	s.stop(t)
	t.Logf("kube-apiserver stopped in %v", time.Since(t0).Round(time.Millisecond))
	load.set(qWebLoad, 1.2)
	// Alertmanager retries a 5xx; each try meets the outage.
	for i := range 3 {
		out, err := alert()
		code := errorCode(err)
		t.Logf("during the outage, try %d: code %d, %v", i+1, code, err)
		if err == nil || code < 500 {
			t.Errorf("during the outage: code %d (%v), outcome %+v; want 5xx so that Alertmanager retries", code, err, out)
		}
		if out.Written {
			t.Errorf("during the outage: outcome %+v says written", out)
		}
	}

	t0 = time.Now()
	s.restart(t)
	t.Logf("kube-apiserver restarted and ready in %v", time.Since(t0).Round(time.Millisecond))
	h.Resume(t) // nothing was written while the only API server was down
	out, err := alert()
	if err != nil || out.Before != 6 || out.After != 11 || !out.Written {
		t.Errorf("after the restart: %+v, %v; want 6 -> 11 written by the same Controller", out, err)
	}
	if got, want := h.Sync(t, "web"), []int32{4, 6, 11}; !slices.Equal(got, want) {
		t.Errorf("replica history %v, want %v", got, want)
	}
}
