package process

import (
	"context"
	"testing"

	"github.com/oklog/run"

	"github.com/debi-scaler/debi/config"
	"github.com/debi-scaler/debi/elasticscaler"
)

// TestElasticScalersNil: a webhook without global.elastic_scalers has no actors; its
// configuration is the file's, its decisions are reported to nobody and its run group gets
// nothing.
func TestElasticScalersNil(t *testing.T) {
	var e *ElasticScalers
	file := &config.Config{}
	if got := e.With(file); got != file {
		t.Errorf("With = %p, want the file's %p", got, file)
	}
	e.Observe(elasticscaler.Decision{Policy: "web"})
	var g run.Group
	e.Add(context.Background(), &g)
	if err := g.Run(); err != nil { // an empty group returns at once
		t.Fatalf("Run = %v", err)
	}
}
