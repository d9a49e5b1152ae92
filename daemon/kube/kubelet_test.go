package kube

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeletServer serves testdata/kubelet_pods.json over TLS to the bearer
// token "tok", and 403 to any other, as a kubelet does without nodes/proxy.
func kubeletServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	body, err := os.ReadFile("testdata/kubelet_pods.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "Forbidden (user=system:serviceaccount:vramscope:vramscope, verb=get, resource=nodes, subresource(s)=[proxy])", http.StatusForbidden)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	return srv, ca
}

func TestKubeletPods(t *testing.T) {
	srv, ca := kubeletServer(t)
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("tok\n"), 0o600)
	k, err := NewKubelet(srv.URL+"/pods", tok, ca, false)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := k.Pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[0].Name != "llama-finetune-worker-3" || pods[0].Namespace != "ml-team" || pods[0].UID != uid1 {
		t.Fatalf("pods %+v", pods)
	}
	if c := pods[0].Containers; c[cid1] != "trainer" || len(c) != 3 {
		t.Errorf("containers %v", c)
	}
	if len(pods[1].Containers) != 0 {
		t.Errorf("a container not started yet has no ID: %v", pods[1].Containers)
	}

	r := NewResolver(k, t.Logf)
	if a := r.Attribute(Ref{uid1, cid1}); a.Pod != "" || a.PodUID != uid1 {
		t.Errorf("before a refresh: %+v", a) // lookups never wait for the kubelet
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Attribute(Ref{uid1, cid1}).Pod == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the miss above started a refresh
	}
	want := Attribution{PodUID: uid1, ContainerID: cid1, Pod: "llama-finetune-worker-3", Namespace: "ml-team", Container: "trainer"}
	if a := r.Attribute(Ref{uid1, cid1}); a != want {
		t.Errorf("after: %+v, want %+v", a, want)
	}
	if a := r.Attribute(Ref{"", cid1}); a.Pod != "" {
		t.Errorf("no pod: %+v", a)
	}
}

func TestKubeletRefuses(t *testing.T) {
	srv, ca := kubeletServer(t)
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("wrong"), 0o600)
	k, _ := NewKubelet(srv.URL+"/pods", tok, ca, false)
	var logged []string
	r := NewResolver(k, func(f string, a ...any) { logged = append(logged, f) })
	err := r.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "proxy") {
		t.Errorf("refused: %v", err)
	}
	r.Refresh(context.Background())
	if len(logged) != 1 {
		t.Errorf("the same refusal logged %d times", len(logged))
	}
	if a := r.Attribute(Ref{uid1, cid1}); a.PodUID != uid1 || a.Pod != "" {
		t.Errorf("%+v", a)
	}
	// Without the CA the kubelet's self-signed certificate is refused.
	k2, _ := NewKubelet(srv.URL+"/pods", "", "", false)
	if _, err := k2.Pods(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("unverified certificate: %v", err)
	}
	if _, err := NewKubelet(srv.URL, "", filepath.Join(t.TempDir(), "none"), false); err == nil {
		t.Error("a missing CA file is an error")
	}
}

func TestDecodePodsBounded(t *testing.T) {
	if _, err := decodePods(strings.NewReader(`{"items": [`)); err == nil {
		t.Error("truncated list decoded")
	}
	if _, err := decodePods(strings.NewReader(`{"items": "` + strings.Repeat("x", MaxPodListBytes) + `"}`)); err == nil || !strings.Contains(err.Error(), "64 MiB") {
		t.Errorf("oversized list: %v", err)
	}
}
