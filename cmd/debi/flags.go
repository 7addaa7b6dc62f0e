package main

import (
	kingpin "github.com/alecthomas/kingpin/v2"

	"github.com/debi-scaler/debi/tidal/controller"
)

// The flags of the long-running subcommands, each filling its package's option struct: the
// packages declare no flag. --log.level and --log.format belong to the application, which builds
// the one *slog.Logger it passes to the packages.

// webhookFlags declares the flags of `debi webhook` on cmd and returns the options they fill
// when the command line is parsed.
func webhookFlags(cmd *kingpin.CmdClause) *webhookOptions {
	o := &webhookOptions{}
	cmd.Flag("config.file", "debi configuration file; reloaded on SIGHUP and POST|PUT /-/reload.").Default("debi.yml").StringVar(&o.ConfigFile)
	cmd.Flag("web.enable-lifecycle", "Enable reload via HTTP request (POST|PUT /-/reload); SIGHUP always reloads.").Default("false").BoolVar(&o.EnableLifecycle)
	cmd.Flag("kubeconfig", "Path to a kubeconfig; empty means $KUBECONFIG, then ~/.kube/config, then in-cluster configuration.").Default("").StringVar(&o.Kubeconfig)
	cmd.Flag("web.config.file", "Path to a web configuration file enabling TLS or basic auth (exporter-toolkit format).").Default("").StringVar(&o.WebConfigFile)
	cmd.Flag("web.listen-address", "Address to listen on for notifications, /-/healthy, /-/ready, /-/reload and /metrics.").Default(":9108").StringVar(&o.ListenAddress)
	return o
}

// exporterFlags declares the flags of `debi exporter` on cmd and returns the options they fill
// when the command line is parsed.
func exporterFlags(cmd *kingpin.CmdClause) *exporterOptions {
	o := &exporterOptions{}
	cmd.Flag("config.file", "debi configuration file; reloaded on SIGHUP and POST|PUT /-/reload.").Default("debi.yml").StringVar(&o.ConfigFile)
	cmd.Flag("web.enable-lifecycle", "Enable reload via HTTP request (POST|PUT /-/reload); SIGHUP always reloads.").Default("false").BoolVar(&o.EnableLifecycle)
	cmd.Flag("shard", "Run only the policies whose name hashes (FNV-1a) to i modulo n, as i/n (0/1: all).").Default("0/1").SetValue(&o.Shard)
	cmd.Flag("web.config.file", "Path to a web configuration file enabling TLS or authentication (exporter-toolkit format).").Default("").StringVar(&o.WebConfigFile)
	cmd.Flag("web.listen-address", "Address on which to expose metrics, /-/healthy, /-/ready and /-/reload.").Default(":9107").StringVar(&o.ListenAddress)
	cmd.Flag("kubeconfig", "Path to a kubeconfig for the ElasticScaler watch (global.elastic_scalers) and the metrics APIs (metrics read from external, object or pods sources); empty means $KUBECONFIG, then ~/.kube/config, then in-cluster configuration.").Default("").StringVar(&o.Kubeconfig)
	return o
}

// tidalFlags declares the flags of `debi tidal-controller` on cmd and returns what they fill
// when the command line is parsed.
func tidalFlags(cmd *kingpin.CmdClause) *tidalOptions {
	f := &tidalOptions{}
	cmd.Flag("kubeconfig", "Path to a kubeconfig; empty means $KUBECONFIG, then ~/.kube/config, then in-cluster configuration.").Default("").StringVar(&f.Kubeconfig)
	cmd.Flag("namespace", "Namespace whose Tidals to evaluate; repeat for several; none means all namespaces.").StringsVar(&f.Namespaces)
	cmd.Flag("leader-elect", "Evaluate only while holding a Lease, so that replicas do not fight (--no-leader-elect for a single replica).").Default("true").BoolVar(&f.LeaderElect)
	cmd.Flag("leader-elect.namespace", "Namespace of the Lease.").Default(controller.DefaultLeaseNamespace).StringVar(&f.LeaseNamespace)
	cmd.Flag("leader-elect.lease-name", "Name of the Lease.").Default(controller.DefaultLeaseName).StringVar(&f.LeaseName)
	cmd.Flag("web.listen-address", "Address on which to expose /metrics, /-/healthy and /-/ready.").Default(":9109").StringVar(&f.ListenAddress)
	cmd.Flag("web.config.file", "Path to a web configuration file enabling TLS or authentication (exporter-toolkit format).").Default("").StringVar(&f.WebConfigFile)
	return f
}
