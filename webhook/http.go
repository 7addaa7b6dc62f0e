package webhook

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// This is the only file that knows Gin: it authenticates, bounds and reads the body, calls the
// decoders and the Scaler, and maps errors onto Alertmanager's retry contract
// (2xx done, 4xx permanent, 5xx retry).

// routerOptions configure the HTTP layer.
type routerOptions struct {
	scaler Scaler
	// token is the bearer token requests to /v1/* must carry; empty disables the check.
	token        string
	maxBodyBytes int64
	timeout      time.Duration
	ready        func() error
	gatherer     prometheus.Gatherer
	metrics      *metrics
	logger       *slog.Logger
}

func init() { gin.SetMode(gin.ReleaseMode) }

func newRouter(o routerOptions) http.Handler {
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, rec any) {
		o.logger.Error("panic while handling a request", "path", c.Request.URL.Path, "panic", fmt.Sprint(rec))
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal error"})
	}))
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	r.GET("/readyz", func(c *gin.Context) {
		if err := o.ready(); err != nil {
			c.String(http.StatusServiceUnavailable, "not ready: %v", err)
			return
		}
		c.String(http.StatusOK, "ok")
	})
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(o.gatherer, promhttp.HandlerOpts{})))

	v1 := r.Group("/v1", o.auth)
	v1.POST("/alertmanager", func(c *gin.Context) {
		o.handle(c, "alertmanager", func(ctx context.Context, b []byte) (any, error) {
			m, err := DecodeAlertmanager(b)
			if err != nil {
				return nil, err
			}
			return o.scaler.Alerts(ctx, m)
		})
	})
	v1.POST("/tidal", func(c *gin.Context) {
		o.handle(c, "tidal", func(ctx context.Context, b []byte) (any, error) {
			e, err := DecodeTidal(b)
			if err != nil {
				return nil, err
			}
			out, err := o.scaler.Tidal(ctx, e)
			if err != nil {
				return nil, err
			}
			return out, nil
		})
	})
	return r
}

func (o routerOptions) auth(c *gin.Context) {
	if o.token == "" {
		return
	}
	h := c.GetHeader("Authorization")
	got, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(o.token)) != 1 {
		o.metrics.notifications.WithLabelValues(strings.TrimPrefix(c.FullPath(), "/v1/"), "401").Inc()
		c.Header("WWW-Authenticate", `Bearer realm="debi-webhook"`)
		c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "missing or wrong bearer token"})
	}
}

// handle reads at most maxBodyBytes, runs f under the decision timeout and answers.
func (o routerOptions) handle(c *gin.Context, endpoint string, f func(context.Context, []byte) (any, error)) {
	start := time.Now()
	code, body := o.serve(c, f)
	o.metrics.notifications.WithLabelValues(endpoint, fmt.Sprint(code)).Inc()
	o.metrics.notificationDuration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	c.JSON(code, body)
}

func (o routerOptions) serve(c *gin.Context, f func(context.Context, []byte) (any, error)) (int, any) {
	if c.Request.ContentLength > o.maxBodyBytes {
		return http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("body of %d bytes exceeds the limit of %d", c.Request.ContentLength, o.maxBodyBytes)}
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, o.maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("body exceeds the limit of %d bytes", o.maxBodyBytes)}
		}
		return http.StatusBadRequest, gin.H{"error": "reading body: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), o.timeout)
	defer cancel()
	res, err := f(ctx, b)
	if err != nil {
		code := errorCode(err)
		if code >= 500 {
			o.logger.Warn("notification failed; the sender should retry", "path", c.Request.URL.Path, "code", code, "err", err)
		} else {
			o.logger.Info("notification refused", "path", c.Request.URL.Path, "code", code, "err", err)
		}
		return code, gin.H{"error": err.Error(), "retry": code >= 500, "outcomes": res}
	}
	return http.StatusOK, gin.H{"status": "ok", "outcomes": res}
}
