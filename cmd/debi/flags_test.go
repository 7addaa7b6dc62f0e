package main

import (
	"testing"

	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/exporter"
)

func TestWebhookFlags(t *testing.T) {
	app := kingpin.New("debi", "")
	app.Terminate(nil)
	o := webhookFlags(app.Command("webhook", ""))
	if _, err := app.Parse([]string{"webhook", "--config.file=x.yml", "--web.config.file=web.yml"}); err != nil {
		t.Fatal(err)
	}
	if o.ConfigFile != "x.yml" || o.ListenAddress != ":9108" || o.WebConfigFile != "web.yml" || o.Kubeconfig != "" {
		t.Errorf("options = %+v", o)
	}
}

func TestExporterFlags(t *testing.T) {
	parse := func(args ...string) (*exporterOptions, error) {
		app := kingpin.New("debi", "")
		app.Terminate(nil)
		o := exporterFlags(app.Command("exporter", ""))
		_, err := app.Parse(append([]string{"exporter"}, args...))
		return o, err
	}
	o, err := parse()
	if err != nil || o.ListenAddress != ":9107" || o.Shard.String() != "0/1" || o.ConfigFile != "debi.yml" || o.WebConfigFile != "" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parse("--config.file=x.yml", "--shard=2/3", "--web.listen-address=127.0.0.1:1", "--web.config.file=web.yml")
	if err != nil {
		t.Fatal(err)
	}
	if o.ConfigFile != "x.yml" || o.Shard != (exporter.Shard{Index: 2, Count: 3}) || o.ListenAddress != "127.0.0.1:1" || o.WebConfigFile != "web.yml" {
		t.Fatalf("parsed: %+v", o)
	}
	if _, err := parse("--shard=3/3"); err == nil {
		t.Fatal("--shard=3/3 accepted")
	}
	if _, err := parse("-config.file=x.yml"); err == nil {
		t.Fatal("single-dash -config.file accepted")
	}
}
