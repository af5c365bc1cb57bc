// Package k8s_test checks the Kubernetes manifests of deployments/k8s
// without a cluster and without the network:
//
//   - every manifest file decodes strictly into its k8s.io/api type (an
//     unknown or misspelt field fails), every kustomization.yaml strictly
//     into kustomize's Kustomization;
//   - the base and the example overlay build with kustomize's Go API
//     (krusty, on the local file system), and the built objects decode
//     strictly too;
//   - in each build, the ConfigMap's config.yaml, with the environment the
//     pod gets (downward API, Secret), loads and validates with the
//     project's config package;
//   - the probes, ports, paths, volumes, identity, security context and
//     grace period agree with that configuration and with what the binary
//     serves (the HTTP handler registrations in cmd/consumer).
package k8s_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kernelstream/kernelstream/config"
)

// The contract between the image (Dockerfile), the binary (cmd/consumer)
// and the manifests.
const (
	configPath    = "/etc/kernelstream/config.yaml" // the -config argument
	configMapKey  = "config.yaml"
	binaryPath    = "/kernelstream-consumer"
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
	metricsPath   = "/metrics"
	httpPortName  = "http"
	servePortName = "serve" // the scoring endpoint's, when serve.addr is set
	nonRootUID    = 65532
	// The pod must outlive the consumer's own shutdown (shutdown.grace) by
	// at least this much: SIGTERM delivery, the watchdog, process exit.
	graceMargin = 10 * time.Second
)

var builds = []string{"base", "overlays/example", "overlays/ephemeral"}

// object is one decoded manifest.
type object struct {
	kind, name, source string
	obj                any
}

// newObject returns an empty value of the k8s.io/api type for apiVersion and
// kind, or nil when the kind is not one these manifests may use.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	}
	return nil
}

// unmarshalStrict decodes YAML into v as the API server's strict field
// validation does: duplicate keys, unknown fields and fields whose case
// differs from the schema (clusterIp for clusterIP, which encoding/json
// would accept) are errors.
func unmarshalStrict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeStrict decodes one YAML document into its k8s.io/api type; unknown
// fields, duplicate fields and unknown kinds are errors.
func decodeStrict(doc []byte, source string) (object, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return object{}, fmt.Errorf("%s: %w", source, err)
	}
	obj := newObject(head.APIVersion, head.Kind)
	if obj == nil {
		return object{}, fmt.Errorf("%s: unexpected apiVersion/kind %s/%s", source, head.APIVersion, head.Kind)
	}
	if err := unmarshalStrict(doc, obj); err != nil {
		return object{}, fmt.Errorf("%s: %s %s: %w", source, head.Kind, head.Metadata.Name, err)
	}
	return object{kind: head.Kind, name: head.Metadata.Name, source: source, obj: obj}, nil
}

// splitDocs splits a YAML stream on document separators, dropping empty
// documents (comments only).
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		var v any
		if yaml.Unmarshal(d, &v) == nil && v == nil {
			continue
		}
		docs = append(docs, d)
	}
	return docs
}

// TestManifestFilesDecodeStrictly decodes every file under deployments/k8s:
// kustomization.yaml into kustomize's Kustomization, config.yaml with the
// config package, everything else into the k8s.io/api types (patches too:
// a misspelt field in a patch would otherwise be dropped silently).
func TestManifestFilesDecodeStrictly(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d manifest files: %v", len(files), files)
	}
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			switch filepath.Base(path) {
			case "kustomization.yaml":
				var k types.Kustomization
				if err := unmarshalStrict(data, &k); err != nil {
					t.Fatalf("kustomization: %v", err)
				}
				if k.Kind != types.KustomizationKind || k.APIVersion != types.KustomizationVersion {
					t.Fatalf("kustomization: apiVersion/kind %s/%s", k.APIVersion, k.Kind)
				}
				if msgs := k.CheckDeprecatedFields(); msgs != nil {
					for _, msg := range *msgs {
						t.Errorf("kustomization: deprecated: %s", msg)
					}
				}
			case "config.yaml":
				if _, err := config.Parse(data, path); err != nil {
					t.Fatal(err)
				}
			default:
				docs := splitDocs(data)
				if len(docs) == 0 {
					t.Fatal("no YAML document")
				}
				for _, doc := range docs {
					if _, err := decodeStrict(doc, path); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// The strict decoder must actually be strict, or the test above proves
// nothing.
func TestDecodeStrictRejectsUnknownFields(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replica: 3}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIp: None}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	} {
		if _, err := decodeStrict([]byte(doc), "inline"); err == nil {
			t.Errorf("accepted %q", doc)
		}
	}
}

// build runs kustomize on dir and decodes every resulting object strictly.
func build(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []object
	for _, r := range m.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeStrict(doc, "build of "+dir)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}

// find returns the only object of kind (and name, if given).
func find[T any](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if o.kind == kind && (name == "" || o.name == name) {
			found = append(found, o.obj.(T))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q in the build, found %d", kind, name, len(found))
	}
	return found[0]
}

func findOptional[T any](objs []object, kind, name string) (T, bool) {
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o.obj.(T), true
		}
	}
	var zero T
	return zero, false
}

// clusterSecrets are the Secrets an overlay expects to exist in the cluster
// without applying them (so that an apply never overwrites the real ones):
// the example overlay documents their shape in secret.example.yaml.
var clusterSecrets = map[string]string{"overlays/example": "overlays/example/secret.example.yaml"}

func TestKustomizeBuilds(t *testing.T) {
	for _, dir := range builds {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			if _, ok := findOptional[*corev1.Secret](objs, "Secret", "kernelstream-kafka"); ok {
				t.Errorf("the build applies Secret kernelstream-kafka: kubectl apply -k would overwrite the real one")
			}
			if f, ok := clusterSecrets[dir]; ok {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, doc := range splitDocs(data) {
					o, err := decodeStrict(doc, f)
					if err != nil {
						t.Fatal(err)
					}
					objs = append(objs, o)
				}
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.kind]++
			}
			for _, kind := range []string{"StatefulSet", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget", "NetworkPolicy"} {
				if kinds[kind] != 1 {
					t.Errorf("want one %s, found %d", kind, kinds[kind])
				}
			}
			checkBuild(t, objs)
		})
	}
}

// TestMonitoring: the ServiceMonitor scrapes the Service's HTTP port at
// /metrics, the example overlay deploys it, and every alert rule has a
// severity and a summary. (That the rules and the Grafana dashboard name
// only metrics the binary registers is checked in cmd/consumer.)
func TestMonitoring(t *testing.T) {
	objs := build(t, "monitoring")
	sm := find[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor", "kernelstream")
	base := build(t, "base")
	svc := find[*corev1.Service](t, base, "Service", "")
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %q", k, v, svc.Labels[k])
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != httpPortName || sm.Spec.Endpoints[0].Path != metricsPath {
		t.Errorf("ServiceMonitor endpoints %+v: want port %s path %s", sm.Spec.Endpoints, httpPortName, metricsPath)
	}
	rules := find[*monitoringv1.PrometheusRule](t, objs, "PrometheusRule", "kernelstream")
	n := 0
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Expr.String() == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr, severity and summary", r)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d alert rules", n)
	}
	example := build(t, "overlays/example")
	find[*monitoringv1.ServiceMonitor](t, example, "ServiceMonitor", "kernelstream")
}

// checkBuild checks one kustomize build for consistency with itself, with
// the consumer's configuration and with the binary.
func checkBuild(t *testing.T, objs []object) {
	sts := find[*appsv1.StatefulSet](t, objs, "StatefulSet", "")
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, found %d", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The configuration the pod runs with.
	if !slices.Equal(c.Args, []string{"-config", configPath}) || len(c.Command) != 0 {
		t.Errorf("container command %q args %q: want the image's entrypoint with -config %s", c.Command, c.Args, configPath)
	}
	mount := mountAt(t, c, filepath.Dir(configPath))
	vol := volume(t, pod, mount.Name)
	if vol.ConfigMap == nil {
		t.Fatalf("volume %s at %s is not a ConfigMap", vol.Name, mount.MountPath)
	}
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", vol.ConfigMap.Name)
	data, ok := cm.Data[configMapKey]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", cm.Name, configMapKey)
	}
	if len(vol.ConfigMap.Items) > 0 && !slices.ContainsFunc(vol.ConfigMap.Items, func(k corev1.KeyToPath) bool {
		return k.Key == configMapKey && k.Path == filepath.Base(configPath)
	}) {
		t.Errorf("ConfigMap volume items %v do not project %s to %s", vol.ConfigMap.Items, configMapKey, configPath)
	}
	env := podEnv(t, objs, c, sts.Name+"-0")
	cfg, err := config.Parse([]byte(data), "ConfigMap "+cm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.ApplyEnv(&cfg, env); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("ConfigMap %s/%s with the pod's environment: %v", cm.Name, configMapKey, err)
	}
	if cfg.Kafka.InstanceID != sts.Name+"-0" {
		t.Errorf("kafka.instance_id in the pod is %q, want the pod name %s-0", cfg.Kafka.InstanceID, sts.Name)
	}

	checkIdentity(t, c)
	checkHTTP(t, objs, sts, c, cfg)
	checkServe(t, sts, c, cfg)
	checkStorage(t, sts, c, cfg)
	checkSecrets(t, objs, pod, c, cfg)
	checkSecurity(t, objs, sts)
	checkResources(t, c)
	checkGrace(t, pod, cfg)
	checkSelectors(t, objs, sts)
	checkNetworkPolicy(t, objs, cfg)
}

func mountAt(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m
		}
	}
	t.Fatalf("nothing mounted at %s", path)
	return corev1.VolumeMount{}
}

func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// podEnv resolves the container's environment as the kubelet would for pod
// podName: literal values, the downward API's metadata.name, Secret keys
// (an optional reference to a Secret not in the build is left unset).
func podEnv(t *testing.T, objs []object, c corev1.Container, podName string) []string {
	t.Helper()
	if len(c.EnvFrom) > 0 {
		t.Errorf("envFrom hides which KERNELSTREAM_* variables are set; list them in env")
	}
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			// $(NAME) refers to a variable defined earlier in the list,
			// as the kubelet expands it.
			v := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(e.Value, func(ref string) string {
				name := ref[2 : len(ref)-1]
				for i := len(env) - 1; i >= 0; i-- {
					if k, val, _ := strings.Cut(env[i], "="); k == name {
						return val
					}
				}
				t.Errorf("env %s refers to %s, not defined before it", e.Name, ref)
				return ref
			})
			env = append(env, e.Name+"="+v)
		case e.ValueFrom.FieldRef != nil:
			if e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("env %s: unexpected fieldRef %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env = append(env, e.Name+"="+podName)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, ok := findOptional[*corev1.Secret](objs, "Secret", ref.Name)
			if !ok {
				if ref.Optional == nil || !*ref.Optional {
					t.Errorf("env %s: Secret %s is not in the build and the reference is not optional", e.Name, ref.Name)
				}
				continue
			}
			v, ok := s.StringData[ref.Key]
			if !ok {
				b, ok := s.Data[ref.Key]
				if !ok {
					t.Errorf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
					continue
				}
				v = string(b)
			}
			env = append(env, e.Name+"="+v)
		case e.ValueFrom.ResourceFieldRef != nil:
			if strings.HasPrefix(e.Name, config.EnvPrefix) {
				t.Errorf("env %s: a configuration key from a resource field", e.Name)
			}
		default:
			t.Errorf("env %s: unexpected valueFrom", e.Name)
		}
	}
	return env
}

// checkIdentity: the pod name reaches the sticky balancer as POD_NAME and as
// kafka.instance_id.
func checkIdentity(t *testing.T, c corev1.Container) {
	for _, name := range []string{"POD_NAME", config.EnvPrefix + "KAFKA_INSTANCE_ID"} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("env %s must come from the downward API (fieldRef metadata.name)", name)
		}
	}
}

// checkHTTP: the container port, the probes, the Service and the scrape
// annotation use http.addr's port and the paths the binary serves.
func checkHTTP(t *testing.T, objs []object, sts *appsv1.StatefulSet, c corev1.Container, cfg config.Config) {
	_, portStr, err := net.SplitHostPort(cfg.HTTP.Addr)
	if err != nil {
		t.Fatalf("http.addr %q: %v", cfg.HTTP.Addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("http.addr %q: port: %v", cfg.HTTP.Addr, err)
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == httpPortName })
	if i < 0 {
		t.Fatalf("no container port named %s", httpPortName)
	}
	if int(c.Ports[i].ContainerPort) != port {
		t.Errorf("container port %s is %d, http.addr %q listens on %d", httpPortName, c.Ports[i].ContainerPort, cfg.HTTP.Addr, port)
	}
	served := servedPaths(t)
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", c.StartupProbe, livenessPath},
		{"livenessProbe", c.LivenessProbe, livenessPath},
		{"readinessProbe", c.ReadinessProbe, readinessPath},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.what)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			t.Errorf("%s: path %s, want %s", p.what, g.Path, p.path)
		}
		if !served[g.Path] {
			t.Errorf("%s: cmd/consumer serves no %s (it registers %v)", p.what, g.Path, served)
		}
		if g.Port != intstr.FromString(httpPortName) && g.Port != intstr.FromInt32(int32(port)) {
			t.Errorf("%s: port %s, want %s (%d)", p.what, g.Port.String(), httpPortName, port)
		}
	}
	if !served[metricsPath] {
		t.Errorf("cmd/consumer serves no %s", metricsPath)
	}
	ann := sts.Spec.Template.Annotations
	if ann["prometheus.io/port"] != portStr || ann["prometheus.io/path"] != metricsPath {
		t.Errorf("scrape annotations %v, want port %s path %s", ann, portStr, metricsPath)
	}
	svc := find[*corev1.Service](t, objs, "Service", sts.Spec.ServiceName)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s must be headless (clusterIP None), is %q", svc.Name, svc.Spec.ClusterIP)
	}
	want := map[string]int{httpPortName: port}
	if cfg.Serve.Addr != "" {
		want[servePortName] = servePort(t, cfg)
	}
	for _, p := range svc.Spec.Ports {
		if wp, ok := want[p.Name]; !ok || p.TargetPort != intstr.FromString(p.Name) || int(p.Port) != wp {
			t.Errorf("Service port %+v, want one of %v, each to the container port of its name", p, want)
		}
		delete(want, p.Name)
	}
	if len(want) > 0 {
		t.Errorf("Service %s lacks the ports %v", svc.Name, want)
	}
}

func servePort(t *testing.T, cfg config.Config) int {
	_, portStr, err := net.SplitHostPort(cfg.Serve.Addr)
	port, err2 := strconv.Atoi(portStr)
	if err != nil || err2 != nil {
		t.Fatalf("serve.addr %q: %v %v", cfg.Serve.Addr, err, err2)
	}
	return port
}

// checkServe: with serve.addr (scoring on request) the container exposes
// its port as "serve", and the address the pod advertises to the other
// members is the pod's own name with that port; without it, no such port.
func checkServe(t *testing.T, sts *appsv1.StatefulSet, c corev1.Container, cfg config.Config) {
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == servePortName })
	if cfg.Serve.Addr == "" {
		if i >= 0 {
			t.Errorf("container port %s, but serve.addr is empty (scoring off)", servePortName)
		}
		return
	}
	port := servePort(t, cfg)
	if i < 0 || int(c.Ports[i].ContainerPort) != port {
		t.Errorf("serve.addr %q: want a container port %s = %d", cfg.Serve.Addr, servePortName, port)
	}
	host, aport, err := net.SplitHostPort(cfg.Serve.Advertised())
	if err != nil || !strings.HasPrefix(host, sts.Name+"-0."+sts.Spec.ServiceName+".") || aport != strconv.Itoa(port) {
		t.Errorf("serve.advertised_addr in pod %s-0 is %q: want the pod's DNS name under Service %s, port %d", sts.Name, cfg.Serve.Advertised(), sts.Spec.ServiceName, port)
	}
}

// servedPaths returns the paths the consumer (internal/service) registers on an HTTP mux
// (calls X.Handle("/path", ...) and X.HandleFunc("/path", ...) with a
// literal path), read from its source: the binary the image runs.
func servedPaths(t *testing.T) map[string]bool {
	t.Helper()
	dir := filepath.Join("..", "..", "internal", "service") // the consumer's HTTP server
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if path, err := strconv.Unquote(lit.Value); err == nil {
					served[path] = true
				}
			}
			return true
		})
	}
	if len(served) == 0 {
		t.Fatalf("found no HTTP handler registration in %s", dir)
	}
	return served
}

// checkStorage: checkpoint.dir is the volume claim template, read-write.
func checkStorage(t *testing.T, sts *appsv1.StatefulSet, c corev1.Container, cfg config.Config) {
	m := mountAt(t, c, cfg.Checkpoint.Dir)
	if m.ReadOnly {
		t.Errorf("checkpoint.dir %s is mounted read-only", cfg.Checkpoint.Dir)
	}
	if i := slices.IndexFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }); i >= 0 && sts.Spec.Template.Spec.Volumes[i].EmptyDir != nil {
		// State on the node only: it must live in Kafka too.
		if !cfg.Changelog.Enabled {
			t.Errorf("checkpoint.dir %s is an emptyDir but changelog.enabled is false: a rescheduled pod would lose its state", cfg.Checkpoint.Dir)
		}
		if len(sts.Spec.VolumeClaimTemplates) != 0 {
			t.Errorf("checkpoint.dir is an emptyDir but the StatefulSet still claims volumes")
		}
		return
	}
	i := slices.IndexFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == m.Name })
	if i < 0 {
		t.Fatalf("checkpoint.dir %s is volume %s, not a volume claim template", cfg.Checkpoint.Dir, m.Name)
	}
	pvc := sts.Spec.VolumeClaimTemplates[i]
	if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("volume claim %s: access modes %v, want ReadWriteOnce", pvc.Name, pvc.Spec.AccessModes)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.Sign() <= 0 {
		t.Errorf("volume claim %s requests no storage", pvc.Name)
	}
	// Every other writable path is an emptyDir (the root filesystem is
	// read-only).
	for _, m := range c.VolumeMounts {
		if m.ReadOnly || m.MountPath == cfg.Checkpoint.Dir {
			continue
		}
		if v := volume(t, sts.Spec.Template.Spec, m.Name); v.EmptyDir == nil {
			t.Errorf("writable mount %s is neither the state volume nor an emptyDir", m.MountPath)
		}
	}
}

// checkSecrets: every file the configuration names (TLS, SASL password file)
// is projected from a Secret volume; secrets are not in the ConfigMap.
func checkSecrets(t *testing.T, objs []object, pod corev1.PodSpec, c corev1.Container, cfg config.Config) {
	tls, sasl := cfg.Kafka.TLS, cfg.Kafka.SASL
	if sasl.Password != "" {
		// It must have come from the environment, not from the file.
		plain, err := config.Parse([]byte(find[*corev1.ConfigMap](t, objs, "ConfigMap", "").Data[configMapKey]), "ConfigMap")
		if err != nil {
			t.Fatal(err)
		}
		if plain.Kafka.SASL.Password != "" {
			t.Errorf("kafka.sasl.password is in the ConfigMap: put it in a Secret")
		}
	}
	for _, f := range []struct{ key, path string }{
		{"kafka.tls.ca_file", tls.CAFile},
		{"kafka.tls.cert_file", tls.CertFile},
		{"kafka.tls.key_file", tls.KeyFile},
		{"kafka.sasl.password_file", sasl.PasswordFile},
		{"serve.tls_cert", cfg.Serve.TLSCert},
		{"serve.tls_key", cfg.Serve.TLSKey},
		{"serve.client_ca", cfg.Serve.ClientCA},
		{"serve.peer_ca", cfg.Serve.PeerCA},
		{"serve.token_file", cfg.Serve.TokenFile},
	} {
		if f.path == "" {
			continue
		}
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Dir(f.path) == m.MountPath })
		if i < 0 {
			t.Errorf("%s %s: no volume mounted at %s", f.key, f.path, filepath.Dir(f.path))
			continue
		}
		v := volume(t, pod, c.VolumeMounts[i].Name)
		if v.Secret == nil {
			t.Errorf("%s %s: volume %s is not a Secret", f.key, f.path, v.Name)
			continue
		}
		key := filepath.Base(f.path)
		for _, it := range v.Secret.Items {
			if it.Path == filepath.Base(f.path) {
				key = it.Key
			}
		}
		if s, ok := findOptional[*corev1.Secret](objs, "Secret", v.Secret.SecretName); ok {
			if _, inString := s.StringData[key]; !inString {
				if _, inData := s.Data[key]; !inData {
					t.Errorf("%s %s: Secret %s has no key %s", f.key, f.path, s.Name, key)
				}
			}
		}
	}
}

// checkSecurity: non-root 65532, read-only root filesystem, no privilege
// escalation, no capabilities, RuntimeDefault seccomp, no API token.
func checkSecurity(t *testing.T, objs []object, sts *appsv1.StatefulSet) {
	pod := sts.Spec.Template.Spec
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != nonRootUID ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser %d, seccomp RuntimeDefault", psc, nonRootUID)
	}
	if psc != nil && (psc.FSGroup == nil || *psc.FSGroup != nonRootUID) {
		t.Errorf("pod securityContext: fsGroup %d, so the state volume is writable by the user", nonRootUID)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("container %s: no securityContext", c.Name)
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot,
			sc.RunAsUser == nil || *sc.RunAsUser != nonRootUID,
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
			sc.Privileged != nil && *sc.Privileged,
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0,
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			t.Errorf("container %s: securityContext %+v is not the restrictive one", c.Name, sc)
		}
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("pod: automountServiceAccountToken must be false")
	}
	sa := find[*corev1.ServiceAccount](t, objs, "ServiceAccount", pod.ServiceAccountName)
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s: automountServiceAccountToken must be false", sa.Name)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("pod uses host namespaces")
	}
}

// checkResources: requests and limits for CPU and memory, and GOMEMLIMIT
// following the memory limit.
func checkResources(t *testing.T, c corev1.Container) {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			t.Errorf("container %s: %s needs a request and a limit", c.Name, r)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("container %s: %s request %s above limit %s", c.Name, r, req.String(), lim.String())
		}
	}
	// GOMEMLIMIT leaves room below the container limit for the memory the
	// Go runtime does not count (Badger's memtables and mapped tables).
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
	if i < 0 || c.Env[i].ValueFrom != nil {
		t.Fatalf("container %s: GOMEMLIMIT must be set to a value", c.Name)
	}
	v := strings.TrimSuffix(c.Env[i].Value, "MiB")
	mib, err := strconv.ParseInt(v, 10, 64)
	if err != nil || v == c.Env[i].Value {
		t.Fatalf("container %s: GOMEMLIMIT %q: want a number of MiB", c.Name, c.Env[i].Value)
	}
	lim := c.Resources.Limits[corev1.ResourceMemory]
	if frac := float64(mib<<20) / float64(lim.Value()); frac < 0.70 || frac > 0.85 {
		t.Errorf("container %s: GOMEMLIMIT %s is %.0f%% of limits.memory %s, want 70-85%%", c.Name, c.Env[i].Value, 100*frac, lim.String())
	}
}

// checkGrace: the pod's termination grace covers the consumer's shutdown
// (finish the record, checkpoint every partition, leave the group).
func checkGrace(t *testing.T, pod corev1.PodSpec, cfg config.Config) {
	if pod.TerminationGracePeriodSeconds == nil {
		t.Fatal("terminationGracePeriodSeconds not set")
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if grace < cfg.Shutdown.Grace+graceMargin {
		t.Errorf("terminationGracePeriodSeconds %v, want at least shutdown.grace %v + %v", grace, cfg.Shutdown.Grace, graceMargin)
	}
	if cfg.Shutdown.Grace <= cfg.Checkpoint.Interval {
		t.Errorf("shutdown.grace %v should exceed checkpoint.interval %v (a final checkpoint must fit)", cfg.Shutdown.Grace, cfg.Checkpoint.Interval)
	}
}

// checkSelectors: the Service, PDB and NetworkPolicy select exactly the
// StatefulSet's pods.
func checkSelectors(t *testing.T, objs []object, sts *appsv1.StatefulSet) {
	labels := sts.Spec.Template.Labels
	matches := func(sel map[string]string) bool {
		if len(sel) == 0 {
			return false
		}
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	if sts.Spec.Selector == nil || !matches(sts.Spec.Selector.MatchLabels) {
		t.Errorf("StatefulSet selector does not match its pod labels")
	}
	if svc := find[*corev1.Service](t, objs, "Service", sts.Spec.ServiceName); !matches(svc.Spec.Selector) {
		t.Errorf("Service %s selector %v does not match pod labels %v", svc.Name, svc.Spec.Selector, labels)
	}
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "")
	if pdb.Spec.Selector == nil || !matches(pdb.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selector does not match pod labels %v", labels)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget: want maxUnavailable 1")
	}
	np := find[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "")
	if !matches(np.Spec.PodSelector.MatchLabels) {
		t.Errorf("NetworkPolicy podSelector does not match pod labels %v", labels)
	}
}

// checkNetworkPolicy: ingress only to the HTTP port; egress only to DNS and
// the brokers' ports.
func checkNetworkPolicy(t *testing.T, objs []object, cfg config.Config) {
	np := find[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "")
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy policyTypes %v: want Ingress and Egress", np.Spec.PolicyTypes)
	}
	members := labels.Set(find[*appsv1.StatefulSet](t, objs, "StatefulSet", "").Spec.Template.Labels)
	isMembers := func(peer networkingv1.NetworkPolicyPeer) bool {
		if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
			return false
		}
		sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		return err == nil && !sel.Empty() && sel.Matches(members)
	}
	membersIn := false
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 {
			t.Errorf("NetworkPolicy: an ingress rule allows every port")
		}
		for _, p := range r.Ports {
			switch {
			case p.Port != nil && *p.Port == intstr.FromString(httpPortName):
			case p.Port != nil && *p.Port == intstr.FromString(servePortName) && cfg.Serve.Addr != "":
				// Learner state is user data: only the peers the overlay
				// names, never everyone.
				if len(r.From) == 0 || len(r.Ports) != 1 {
					t.Errorf("NetworkPolicy: ingress to %s must name its peers (from) in a rule of its own", servePortName)
				}
				membersIn = membersIn || slices.ContainsFunc(r.From, isMembers)
			default:
				t.Errorf("NetworkPolicy: ingress to port %v, only %s (and %s with serve.addr) allowed", p.Port, httpPortName, servePortName)
			}
		}
	}
	if cfg.Serve.Addr != "" && !membersIn {
		t.Errorf("NetworkPolicy: the members cannot reach each other's %s port (forwarding)", servePortName)
	}
	allowed := map[string]bool{} // "proto/port"
	serveEgress := ""
	if cfg.Serve.Addr != "" {
		serveEgress = fmt.Sprintf("TCP/%d", servePort(t, cfg))
	}
	for _, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("NetworkPolicy: an egress rule allows every port")
		}
		if len(r.Ports) == 1 && r.Ports[0].Port != nil && fmt.Sprintf("TCP/%s", r.Ports[0].Port.String()) == serveEgress {
			// Forwarding to the owner of a key's partition: the members only.
			if len(r.To) != 1 || !isMembers(r.To[0]) {
				t.Errorf("NetworkPolicy: egress to the %s port goes to %v, want the members only", servePortName, r.To)
			}
			continue
		}
		for _, p := range r.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if p.Port != nil {
				allowed[fmt.Sprintf("%s/%s", proto, p.Port.String())] = true
			}
		}
	}
	need := []string{"UDP/53", "TCP/53"}
	for _, b := range cfg.Kafka.Brokers {
		_, port, _ := net.SplitHostPort(b)
		need = append(need, "TCP/"+port)
	}
	for _, n := range need {
		if !allowed[n] {
			t.Errorf("NetworkPolicy: no egress to %s (DNS or a broker in kafka.brokers)", n)
		}
	}
	for a := range allowed {
		if !slices.Contains(need, a) {
			t.Errorf("NetworkPolicy: egress to %s, which is neither DNS nor a broker port", a)
		}
	}
}

// TestDockerfile checks the image against the manifests: static build,
// non-root user, the binary and default arguments the StatefulSet relies on.
// (The image itself is not built here: no container runtime in the tests.)
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms int
	var user, entrypoint, cmd string
	static := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms++
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		case "CMD":
			cmd = strings.Join(f[1:], " ")
		}
		if strings.Contains(line, "CGO_ENABLED=0") {
			static = true
		}
	}
	if froms < 2 {
		t.Errorf("want a multi-stage build, found %d FROM", froms)
	}
	if !static {
		t.Errorf("the binary must be built with CGO_ENABLED=0 (static)")
	}
	if uid := strings.SplitN(user, ":", 2)[0]; uid != strconv.Itoa(nonRootUID) {
		t.Errorf("USER %q, want %d (numeric, so runAsNonRoot can verify it)", user, nonRootUID)
	}
	if want := strconv.Quote(binaryPath); entrypoint != "["+want+"]" {
		t.Errorf("ENTRYPOINT %s, want [%s]", entrypoint, want)
	}
	if want := `["-config", "` + configPath + `"]`; cmd != want {
		t.Errorf("CMD %s, want %s", cmd, want)
	}
}
