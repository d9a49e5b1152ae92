package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Pod is one pod of the kubelet's list, as much of it as attribution needs.
type Pod struct {
	UID, Name, Namespace string
	Containers           map[string]string // container ID (hex, no runtime prefix) -> container name
}

// Kubelet reads the pod list of the node's kubelet (GET /pods on its
// authenticated port, 10250). The kubelet authorises it as the "proxy"
// subresource of the node, which deploy/kubernetes grants only in the
// optional rbac-kubelet.yaml (docs/cluster.md says what else it allows).
type Kubelet struct {
	URL       string // e.g. https://10.0.0.5:10250/pods
	TokenFile string // a bearer token, read at every request (projected tokens rotate); "" none
	Client    *http.Client
}

// MaxPodListBytes bounds the kubelet's answer: 110 pods (the kubelet's
// default maximum) with large specs stay far below it.
const MaxPodListBytes = 64 << 20

// NewKubelet makes a client for url. caFile "" uses the system roots;
// insecure skips verifying the kubelet's certificate, which is often
// self-signed (as metrics-server's --kubelet-insecure-tls).
func NewKubelet(url, tokenFile, caFile string, insecure bool) (*Kubelet, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if caFile != "" && !insecure {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kubelet CA %s: no PEM certificate in it", caFile)
		}
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: nil, MaxIdleConns: 1, IdleConnTimeout: time.Minute}
	return &Kubelet{URL: url, TokenFile: tokenFile, Client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
}

// podList is the part of a v1 PodList the attribution reads.
type podList struct {
	Items []struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			UID       string `json:"uid"`
		} `json:"metadata"`
		Status struct {
			Containers     []containerStatus `json:"containerStatuses"`
			InitContainers []containerStatus `json:"initContainerStatuses"`
		} `json:"status"`
	} `json:"items"`
}

type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"` // "containerd://<hex>", "cri-o://<hex>", "docker://<hex>"
}

// Pods fetches the kubelet's pod list.
func (k *Kubelet) Pods(ctx context.Context) ([]Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.URL, nil)
	if err != nil {
		return nil, err
	}
	if k.TokenFile != "" {
		tok, err := os.ReadFile(k.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod list: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("kubelet pod list: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return decodePods(io.LimitReader(resp.Body, MaxPodListBytes+1))
}

func decodePods(r io.Reader) ([]Pod, error) {
	var l podList
	lr := &countingReader{r: r}
	if err := json.NewDecoder(lr).Decode(&l); err != nil {
		if lr.n > MaxPodListBytes {
			return nil, errors.New("kubelet pod list: longer than 64 MiB")
		}
		return nil, fmt.Errorf("kubelet pod list: %w", err)
	}
	out := make([]Pod, 0, len(l.Items))
	for _, it := range l.Items {
		p := Pod{UID: it.Metadata.UID, Name: it.Metadata.Name, Namespace: it.Metadata.Namespace, Containers: map[string]string{}}
		for _, cs := range append(it.Status.Containers, it.Status.InitContainers...) {
			if _, id, ok := strings.Cut(cs.ContainerID, "://"); ok && id != "" {
				p.Containers[id] = cs.Name
			}
		}
		out = append(out, p)
	}
	return out, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
