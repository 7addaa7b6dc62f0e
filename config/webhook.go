package config

// WebhookConfig is the webhook's own section. The webhook acts only on the targets of the
// policies listed in this file, whatever an alert's labels say.
type WebhookConfig struct {
	// Mode is act (patch the scale subresource), hpa-floor (raise an HPA's minReplicas) or
	// shadow (decide, log and export; patch nothing). Default shadow: safe to point at production.
	Mode string `yaml:"mode"`
}

func (w *WebhookConfig) setDefaultsAndValidate(c *Config) error {
	switch w.Mode {
	case "":
		w.Mode = "shadow"
	case "act", "hpa-floor", "shadow":
	default:
		return &fieldError{"webhook.mode", `must be one of act, hpa-floor, shadow, got "` + w.Mode + `"`}
	}
	return nil
}

type fieldError struct{ path, msg string }

func (e *fieldError) Error() string { return e.path + ": " + e.msg }
