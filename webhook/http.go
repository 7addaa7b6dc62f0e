package webhook

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
)

// This is the only file that knows Gin: it authenticates, bounds and reads the body, calls the
// decoders and the Scaler, and maps errors onto Alertmanager's retry contract
// (2xx done, 4xx permanent, 5xx retry).

// RouterOptions configure NewRouter. Live holds the endpoints of the configuration in force, which
// a reload swaps; without it, scaler, token, push, pushToken, maxBodyBytes and timeout describe
// one configuration (tests).
type RouterOptions struct {
	Live *atomic.Pointer[Endpoints]
	// Reload reloads the configuration (POST|PUT /-/reload; nil: 404), served only with
	// Lifecycle (--web.enable-lifecycle); otherwise 403.
	Reload    func() error
	Lifecycle bool
	// Ready is /-/ready's check; Gatherer is what /metrics serves.
	Ready    func() error
	Gatherer prometheus.Gatherer
	Metrics  *Metrics
	Logger   *slog.Logger

	scaler Scaler
	// token is the bearer token POST /v1/alertmanager must carry; empty disables the check.
	token string
	// push serves POST /v1/tidal; pushToken is its own bearer token (empty: no check).
	push         bool
	pushToken    string
	maxBodyBytes int64
	timeout      time.Duration
}

// Endpoints is what one configuration makes of the notification endpoints (NewEndpoints). A reload replaces it
// whole; a request keeps the one it started with, so in-flight requests finish on the old
// Controller.
type Endpoints struct {
	scaler Scaler
	// alertmanager and tidal authenticate their endpoint; nil means no check.
	alertmanager, tidal credential
	// push serves POST /v1/tidal.
	push         bool
	maxBodyBytes int64
	timeout      time.Duration
}

// NewEndpoints makes the endpoints of cfg's configuration, decided by ctl: it reads the token
// files (webhook.bearer_token_file, webhook.tidal.push.bearer_token_file), which are read again
// on change by themselves (a bad change counts in debi_webhook_token_reload_failures_total).
func NewEndpoints(cfg *config.Config, ctl *Controller, m *Metrics, logger *slog.Logger) (*Endpoints, error) {
	wc := cfg.Webhook
	ep := &Endpoints{scaler: ctl, push: wc.Tidal.Push.Enabled, maxBodyBytes: wc.MaxBodyBytes, timeout: wc.DecisionTimeout}
	var am, push *tokenFile
	var err error
	if wc.BearerTokenFile != "" {
		if am, err = newTokenFile(wc.BearerTokenFile, "webhook.bearer_token_file", logger,
			m.tokenReloadFailures.WithLabelValues("alertmanager")); err != nil {
			return nil, err
		}
		ep.alertmanager = am
	}
	if wc.Tidal.Push.Enabled && wc.Tidal.Push.BearerTokenFile != "" {
		if push, err = newTokenFile(wc.Tidal.Push.BearerTokenFile, "webhook.tidal.push.bearer_token_file", logger,
			m.tokenReloadFailures.WithLabelValues("tidal")); err != nil {
			return nil, err
		}
		ep.tidal = push
	}
	if am != nil && push != nil {
		if err := pairTokenFiles(am, push); err != nil {
			return nil, err
		}
	}
	return ep, nil
}

// errPushDisabled is the answer of POST /v1/tidal while webhook.tidal.push is off.
const errPushDisabled = "POST /v1/tidal is disabled: set webhook.tidal.push.enabled: true and " +
	"webhook.tidal.push.bearer_token_file (its own token, not Alertmanager's) to accept pushed Tidal events; " +
	"the Tidal watch (webhook.tidal.enabled) does not need it"

func init() { gin.SetMode(gin.ReleaseMode) }

// NewRouter is the webhook's HTTP layer: POST /v1/alertmanager and /v1/tidal on the live
// endpoints, admission, /metrics, /-/healthy, /-/ready and /-/reload.
func NewRouter(o RouterOptions) http.Handler {
	if o.Live == nil {
		ep := &Endpoints{scaler: o.scaler, push: o.push, maxBodyBytes: o.maxBodyBytes, timeout: o.timeout}
		if o.token != "" {
			ep.alertmanager = staticToken(o.token)
		}
		if o.pushToken != "" {
			ep.tidal = staticToken(o.pushToken)
		}
		o.Live = new(atomic.Pointer[Endpoints])
		o.Live.Store(ep)
	}
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, rec any) {
		o.Logger.Error("panic while handling a request", "path", c.Request.URL.Path, "panic", fmt.Sprint(rec))
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal error"})
	}))
	// /-/healthy and /-/ready as the exporter and the rest of the Prometheus family; /healthz and
	// /readyz are deprecated aliases, kept for one release.
	healthy := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
	ready := func(c *gin.Context) {
		if err := o.Ready(); err != nil {
			c.String(http.StatusServiceUnavailable, "not ready: %v", err)
			return
		}
		c.String(http.StatusOK, "ok")
	}
	r.GET("/-/healthy", healthy)
	r.GET("/-/ready", ready)
	r.GET("/healthz", healthy)
	r.GET("/readyz", ready)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})))
	if o.Reload != nil {
		reload := func(c *gin.Context) {
			if !o.Lifecycle {
				c.JSON(http.StatusForbidden, gin.H{"error": "Lifecycle API is not enabled."})
				return
			}
			if err := o.Reload(); err != nil {
				c.JSON(http.StatusInternalServerError, gin.H{"error": "failed to reload config: " + err.Error()})
				return
			}
			c.JSON(http.StatusOK, gin.H{"status": "ok"})
		}
		r.POST("/-/reload", reload)
		r.PUT("/-/reload", reload)
	}

	// Validating admission of ElasticScaler and Tidal objects: the API server calls it over TLS.
	r.POST(elasticscaler.AdmissionPath, func(c *gin.Context) {
		elasticscaler.Admit(c.Writer, c.Request, o.maxBodyBytes, o.Metrics.admissions)
	})

	r.POST("/v1/alertmanager", func(c *gin.Context) {
		ep := o.Live.Load()
		if !o.authorized(c, ep.alertmanager, "alertmanager") {
			return
		}
		o.handle(c, ep, "alertmanager", func(ctx context.Context, b []byte) (any, error) {
			m, err := DecodeAlertmanager(b)
			if err != nil {
				return nil, err
			}
			return ep.scaler.Alerts(ctx, m)
		})
	})
	r.POST("/v1/tidal", func(c *gin.Context) {
		ep := o.Live.Load()
		if !ep.push {
			o.Metrics.notifications.WithLabelValues("tidal", "404").Inc()
			c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": errPushDisabled, "retry": false})
			return
		}
		if !o.authorized(c, ep.tidal, "tidal") {
			return
		}
		o.handle(c, ep, "tidal", func(ctx context.Context, b []byte) (any, error) {
			e, err := DecodeTidal(b)
			if err != nil {
				return nil, err
			}
			out, err := ep.scaler.Tidal(ctx, e)
			if err != nil {
				return nil, err
			}
			return out, nil
		})
	})
	return r
}

// authorized checks "Authorization: Bearer <token>" against cred, the scheme in any case
// (RFC 7235 §2.1), and answers 401 when it does not match.
func (o RouterOptions) authorized(c *gin.Context, cred credential, endpoint string) bool {
	if cred == nil {
		return true
	}
	want := cred.current()
	scheme, got, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	got = strings.TrimSpace(got)
	var msg string
	switch {
	case !strings.EqualFold(scheme, "Bearer") || got == "":
		msg = "missing bearer token: send Authorization: Bearer <token>"
	case subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1:
		msg = "wrong bearer token"
		if endpoint == "tidal" {
			msg += " (/v1/tidal takes the token of webhook.tidal.push.bearer_token_file, not Alertmanager's)"
		}
	default:
		return true
	}
	o.Metrics.notifications.WithLabelValues(endpoint, "401").Inc()
	c.Header("WWW-Authenticate", `Bearer realm="debi-webhook"`)
	c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": msg, "retry": false})
	return false
}

// handle reads at most maxBodyBytes, runs f under the decision timeout and answers.
func (o RouterOptions) handle(c *gin.Context, ep *Endpoints, endpoint string, f func(context.Context, []byte) (any, error)) {
	start := time.Now()
	code, body := o.serve(c, ep, f)
	// Encode before answering: a body that cannot be encoded (a value no JSON can hold) is a
	// 500 with a message, never a status with an empty body.
	b, err := json.Marshal(body)
	if err != nil {
		o.Logger.Error("answer could not be encoded", "path", c.Request.URL.Path, "err", err)
		code = http.StatusInternalServerError
		b, _ = json.Marshal(gin.H{"error": "answer could not be encoded: " + err.Error(), "retry": true})
	}
	o.Metrics.notifications.WithLabelValues(endpoint, fmt.Sprint(code)).Inc()
	o.Metrics.notificationDuration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	c.Data(code, "application/json; charset=utf-8", b)
}

func (o RouterOptions) serve(c *gin.Context, ep *Endpoints, f func(context.Context, []byte) (any, error)) (int, any) {
	if c.Request.ContentLength > ep.maxBodyBytes {
		return http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("body of %d bytes exceeds the limit of %d", c.Request.ContentLength, ep.maxBodyBytes)}
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, ep.maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("body exceeds the limit of %d bytes", ep.maxBodyBytes)}
		}
		return http.StatusBadRequest, gin.H{"error": "reading body: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), ep.timeout)
	defer cancel()
	res, err := f(ctx, b)
	if err != nil {
		code := errorCode(err)
		if code >= 500 {
			o.Logger.Warn("notification failed; the sender should retry", "path", c.Request.URL.Path, "code", code, "err", err)
		} else {
			o.Logger.Info("notification refused", "path", c.Request.URL.Path, "code", code, "err", err)
		}
		return code, gin.H{"error": err.Error(), "retry": code >= 500, "outcomes": res}
	}
	return http.StatusOK, gin.H{"status": "ok", "outcomes": res}
}

// credential yields the bearer token an endpoint requires now.
type credential interface{ current() string }

// staticToken is a token given as is (tests, benchmarks).
type staticToken string

func (s staticToken) current() string { return string(s) }

// tokenFile is a token read from a file and read again whenever the file changes: each request
// stats the path (a syscall, no read) and compares device, inode, size and modification time
// with the last read. Kubernetes updates a Secret volume by swapping the symlink ..data, so the
// path is stat'ed, never an open descriptor. A file that changes into something unusable
// (unreadable, empty, or the token in force on the other endpoint) keeps the last good token in
// force, and is logged and counted once per change.
type tokenFile struct {
	path     string
	field    string // configuration key, for logs
	log      *slog.Logger
	failures prometheus.Counter
	// other is the token file of the other endpoint, when both endpoints have one
	// (pairTokenFiles): its token in force is refused here, as at start and reload.
	other *tokenFile

	// mu guards the fields below; the two files of a pair share it, so that each check sees the
	// other's token in force and no token is ever in force on both endpoints.
	mu      *sync.Mutex
	tok     string
	seen    os.FileInfo // of the last read, good or bad
	lastErr string      // of the last failure since the last good read
	// clash is a token the file holds that was refused because the other endpoint had it in
	// force; it comes into force once the other endpoint's token has changed.
	clash string
}

// newTokenFile reads path once: a token that cannot be read at start is an error.
func newTokenFile(path, field string, log *slog.Logger, failures prometheus.Counter) (*tokenFile, error) {
	f := &tokenFile{path: path, field: field, log: log, failures: failures, mu: new(sync.Mutex)}
	fi, err := os.Stat(path)
	if err == nil {
		f.tok, err = readToken(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	f.seen = fi
	return f, nil
}

// pairTokenFiles makes am and push, the token files of /v1/alertmanager and /v1/tidal, refuse
// each other's token: whoever may notify through Alertmanager must not push replica counts, and
// the other way round. Holding the same token now is an error (the configuration is refused);
// a file that changes to the other's token in force later is refused as an unusable one is.
// Call it before either is used.
func pairTokenFiles(am, push *tokenFile) error {
	if am.tok == push.tok {
		return errSameToken(push, am)
	}
	mu := new(sync.Mutex)
	am.mu, push.mu = mu, mu
	am.other, push.other = push, am
	return nil
}

// errSameToken says that f holds other's token.
func errSameToken(f, other *tokenFile) error {
	return fmt.Errorf("%s: %s holds the same token as %s; give each endpoint a token of its own", f.field, f.path, other.field)
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return t, nil
}

func (f *tokenFile) current() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		f.fail(err)
		return f.tok
	}
	if sameFile(f.seen, fi) {
		if f.clash != "" && f.clash != f.other.tok {
			f.log.Info("the other endpoint's token changed; the bearer token file's token is in force", "field", f.field, "file", f.path)
			f.tok, f.lastErr, f.clash = f.clash, "", ""
		}
		return f.tok
	}
	f.seen = fi
	t, err := readToken(f.path)
	f.clash = ""
	if err == nil && f.other != nil && t == f.other.tok {
		f.clash, err = t, errSameToken(f, f.other)
	}
	if err != nil {
		f.fail(err)
		return f.tok
	}
	f.take(t)
	return f.tok
}

// take puts t in force.
func (f *tokenFile) take(t string) {
	if t != f.tok {
		f.log.Info("bearer token file changed; new token in force", "field", f.field, "file", f.path)
	}
	f.tok, f.lastErr, f.clash = t, "", ""
}

func (f *tokenFile) fail(err error) {
	if err.Error() == f.lastErr {
		return
	}
	f.lastErr = err.Error()
	f.failures.Inc()
	f.log.Error("cannot reload the bearer token file; the last good token stays in force", "field", f.field, "file", f.path, "err", err)
}

func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
