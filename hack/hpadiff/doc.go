// Package hpadiff is a differential test of scaling.HPA against the Kubernetes HPA controller
// itself (k8s.io/kubernetes/pkg/controller/podautoscaler at v1.37.2): the real controller runs
// on fake clients inside a testing/synctest bubble, and debi's model must give the same replica
// count at every sync. It is a separate module so that k8s.io/kubernetes stays out of debi's
// go.mod; see README.md and hack/hpadiff.sh.
package hpadiff
