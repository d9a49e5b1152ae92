// Package kubernetes holds vramscope's manifests; this test validates them.
// Neither kubeconform nor a kubectl that validates offline is in Debian
// (kubectl --dry-run=client asks an API server), so every document is
// decoded strictly into the Kubernetes API's own Go types (an unknown or
// misspelt field fails) and the settings the deployment depends on are
// checked one by one.
package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// typeOf maps apiVersion/kind to a fresh value of its Go type.
var typeOf = map[string]func() any{
	"v1/Namespace":                                    func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount":                               func() any { return &corev1.ServiceAccount{} },
	"v1/Service":                                      func() any { return &corev1.Service{} },
	"apps/v1/DaemonSet":                               func() any { return &appsv1.DaemonSet{} },
	"batch/v1/Job":                                    func() any { return &batchv1.Job{} },
	"networking.k8s.io/v1/NetworkPolicy":              func() any { return &networkingv1.NetworkPolicy{} },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() any { return &rbacv1.ClusterRole{} },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() any { return &rbacv1.ClusterRoleBinding{} },
	"monitoring.coreos.com/v1/ServiceMonitor":         func() any { return &monitoringv1.ServiceMonitor{} },
	"kustomize.config.k8s.io/v1beta1/Kustomization":   func() any { return &kustomization{} },
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// load decodes every document of every manifest strictly, by kind.
func load(t *testing.T) map[string]any {
	t.Helper()
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 8 {
		t.Fatalf("%d manifests", len(files))
	}
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			mk := typeOf[head.APIVersion+"/"+head.Kind]
			if mk == nil {
				t.Fatalf("%s #%d: no type for %s %s", f, i, head.APIVersion, head.Kind)
			}
			v := mk()
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Errorf("%s #%d (%s): %v", f, i, head.Kind, err)
			}
			out[head.Kind+"/"+f] = v
		}
	}
	return out
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := load(t)
	k := objs["Kustomization/kustomization.yaml"].(*kustomization)
	for _, r := range k.Resources {
		if _, err := os.Stat(r); err != nil {
			t.Errorf("kustomization lists %s: %v", r, err)
		}
	}
	// A typo is caught: the strict decoder is not lenient by accident.
	bad := bytes.Replace(mustRead(t, "daemonset.yaml"), []byte("serviceAccountName:"), []byte("serviceAcountName:"), 1)
	if err := yaml.UnmarshalStrict(bad, &appsv1.DaemonSet{}); err == nil {
		t.Error("serviceAcountName (misspelt) decoded without error")
	}
}

func mustRead(t *testing.T, f string) []byte {
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDaemonSet checks what the daemon relies on and how tight it runs.
func TestDaemonSet(t *testing.T) {
	ds := load(t)["DaemonSet/daemonset.yaml"].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || spec.HostNetwork || spec.HostIPC {
		t.Errorf("hostPID %v (want true), hostNetwork %v, hostIPC %v (want false)", spec.HostPID, spec.HostNetwork, spec.HostIPC)
	}
	if ds.Spec.Selector == nil || ds.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Error("the selector does not select the template")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	tight(t, c)
	if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"serve", "--socket=/run/vramscope/daemon.sock", "--data-dir=/var/lib/vramscope", "--metrics=:9464", "--metrics-public"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %s: %s", want, args)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9464 || c.Ports[0].Name != "metrics" {
		t.Errorf("ports %+v", c.Ports)
	}
	if ds.Spec.Template.Annotations["prometheus.io/port"] != "9464" || ds.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("scrape annotations %v", ds.Spec.Template.Annotations)
	}
	paths := hostPaths(spec)
	if paths["socket"] != "/run/vramscope" || paths["data"] != "/var/lib/vramscope" {
		t.Errorf("hostPaths %v", paths)
	}
	for _, ic := range spec.InitContainers {
		sc := ic.SecurityContext
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("init container %s: %+v", ic.Name, sc)
		}
		for _, add := range sc.Capabilities.Add {
			if add != "CHOWN" && add != "FOWNER" {
				t.Errorf("init container %s adds %s", ic.Name, add)
			}
		}
	}
}

// tight: no capabilities, no escalation, not privileged, read-only root.
func tight(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || (sc.Privileged != nil && *sc.Privileged) || sc.Capabilities == nil ||
		len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container %s: security context %+v", c.Name, sc)
	}
}

func hostPaths(spec corev1.PodSpec) map[string]string {
	out := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			out[v.Name] = v.HostPath.Path
		}
	}
	return out
}

// TestTrainingPodMatchesDaemon: the pod side mounts what the daemon serves,
// at the paths the daemon tells agents, and runs as the daemon's uid.
func TestTrainingPodMatchesDaemon(t *testing.T) {
	objs := load(t)
	ds := objs["DaemonSet/daemonset.yaml"].(*appsv1.DaemonSet)
	job := objs["Job/training-job-example.yaml"].(*batchv1.Job)
	spec := job.Spec.Template.Spec
	if *spec.SecurityContext.RunAsUser != *ds.Spec.Template.Spec.SecurityContext.RunAsUser {
		t.Error("the training pod's uid differs from the daemon's: the socket would refuse it")
	}
	paths := hostPaths(spec)
	if paths["vramscope-socket"] != "/run/vramscope" || paths["vramscope-incoming"] != "/var/lib/vramscope/incoming" {
		t.Errorf("hostPaths %v", paths)
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["VRAMSCOPE_AUTO"] != "1" || env["VRAMSCOPE_SOCKET"] != "/run/vramscope/daemon.sock" || env["PYTHONPATH"] != "/vramscope-agent/vramscope/_boot" {
		t.Errorf("env %v", env)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["vramscope-incoming"] != "/var/lib/vramscope/incoming" || mounts["vramscope-socket"] != "/run/vramscope" {
		t.Errorf("mounts %v: the incoming dir must sit where the daemon's --data-dir puts it", mounts)
	}
	if _, err := os.Stat("../../jupyter/vramscope/_boot/sitecustomize.py"); err != nil {
		t.Errorf("the bootstrap PYTHONPATH names: %v", err)
	}
	tight(t, spec.InitContainers[0])
}

func TestServiceMonitor(t *testing.T) {
	objs := load(t)
	sm := objs["ServiceMonitor/servicemonitor.yaml"].(*monitoringv1.ServiceMonitor)
	svc := objs["Service/service.yaml"].(*corev1.Service)
	if sm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != svc.Labels["app.kubernetes.io/name"] {
		t.Error("the ServiceMonitor does not select the Service")
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("endpoints %+v", sm.Spec.Endpoints)
	}
	if !sm.Spec.Endpoints[0].HonorLabels {
		t.Error("without honorLabels the training pods' pod and namespace labels are renamed exported_pod, exported_namespace")
	}
}
