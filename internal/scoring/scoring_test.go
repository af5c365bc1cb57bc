package scoring

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/processor"
)

// fakeScorer stands for the processor: the HTTP layer's own behaviour
// (statuses, auth, forwarding) is what these tests are about; the answers
// themselves are processor's tests and cmd/consumer's process test.
type fakeScorer struct {
	mu     sync.Mutex
	answer string
	err    error
	keys   []string
}

func (f *fakeScorer) Score(_ context.Context, q *wire.Query, dst []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, string(q.Key))
	if f.err != nil {
		return nil, f.err
	}
	return append(dst, f.answer...), nil
}

func post(t *testing.T, c *http.Client, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const answer = `{"id":null,"key":"u1","model":"aogd-ald","y_hat":0.5,"n_updates":3,"partition":1,"offset":9}`

// TestStatuses: each outcome of the processor and each request fault gets
// its status, a JSON error naming the problem, and Retry-After when
// retryable; the counters follow.
func TestStatuses(t *testing.T) {
	part := 2
	for _, tc := range []struct {
		name, method, path, token, body string
		err                             error
		status                          int
		retryable                       bool
		contains                        string
		outcome                         string
	}{
		{"answered", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`, nil, 200, false, answer, "answered"},
		{"no token", "POST", Path, "", `{"key":"u1","x":[1,2]}`, nil, 401, false, "bearer token", "unauthorized"},
		{"wrong token", "POST", Path, "tok2", `{"key":"u1","x":[1,2]}`, nil, 401, false, "bearer token", "unauthorized"},
		{"GET", "GET", Path, "tok", "", nil, 405, false, "POST a JSON query", "bad_request"},
		{"other path", "POST", "/v1/other", "tok", `{}`, nil, 404, false, "not found", "bad_request"},
		{"bad field", "POST", Path, "tok", `{"key":"u1","x":[1,2,3]}`, nil, 400, false, "x: length 3, model.dim is 2", "bad_request"},
		{"no key", "POST", Path, "tok", `{"x":[1,2]}`, nil, 400, false, "key is required", "bad_request"},
		{"too large", "POST", Path, "tok", `{"key":"` + strings.Repeat("k", 300) + `","x":[1,2]}`, nil, 413, false, "max_value_bytes = 256", "bad_request"},
		{"restoring", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`,
			&processor.ScoreError{Outcome: processor.ScoreUnavailable, Partition: part, Msg: "partition 2 is being restored"}, 503, true, `"partition":2`, "unavailable"},
		{"refused", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`,
			&processor.ScoreError{Outcome: processor.ScoreRefused, Partition: part, Msg: "x: overflow"}, 422, false, "x: overflow", "refused"},
		{"corrupt", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`,
			&processor.ScoreError{Outcome: processor.ScoreFailed, Partition: part, Msg: "corrupt"}, 500, false, "corrupt", "failed"},
		{"owner serves none", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`,
			&processor.ScoreError{Outcome: processor.ScoreElsewhere, Partition: part, OwnerID: "pod-1", Msg: "owned by pod-1"}, 421, false, `"owner_id":"pod-1"`, "misdirected"},
		{"owner unreachable", "POST", Path, "tok", `{"key":"u1","x":[1,2]}`,
			&processor.ScoreError{Outcome: processor.ScoreElsewhere, Partition: part, Owner: "127.0.0.1:1", Msg: "owned by pod-1"}, 503, true, `"owner":"127.0.0.1:1"`, "forward_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := NewHandler(Options{Scorer: &fakeScorer{answer: answer, err: tc.err}, Dim: 2, Limits: wire.Limits{Value: 256},
				Token: []byte("tok"), Self: "self:1", Timeout: time.Second, Registerer: reg})
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tc.status || !strings.Contains(body, tc.contains) {
				t.Fatalf("status %d body %s; want %d with %q", rec.Code, body, tc.status, tc.contains)
			}
			if tc.status != 200 {
				var eb errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == "" || eb.Retryable != tc.retryable {
					t.Fatalf("error body %s (%v), want retryable %v", body, err, tc.retryable)
				}
				if (rec.Header().Get("Retry-After") != "") != tc.retryable {
					t.Fatalf("Retry-After %q", rec.Header().Get("Retry-After"))
				}
			} else if rec.Header().Get(ServedByHeader) != "self:1" {
				t.Fatalf("served-by %q", rec.Header().Get(ServedByHeader))
			}
			if n := counter(reg, "kernelstream_score_requests_total", tc.outcome); n != 1 {
				t.Fatalf("requests_total{outcome=%s} = %v", tc.outcome, n)
			}
		})
	}
}

// counter reads the counter name{outcome} from reg.
func counter(reg *prometheus.Registry, name, outcome string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == name && m.Label[0].GetValue() == outcome {
				return m.Counter.GetValue()
			}
		}
	}
	return -1
}

// TestForwardOneHop: a member that does not own the key's partition
// forwards the request, token and body, to the owner and relays its answer;
// the owner, if it does not own it either (its view is newer: a
// rebalance), answers 503 retryable instead of forwarding again. Over
// mutual TLS, the forwarding member presents its certificate.
func TestForwardOneHop(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "http"
		if withTLS {
			name = "mtls"
		}
		t.Run(name, func(t *testing.T) {
			var server, client *tls.Config
			if withTLS {
				server, client = testTLS(t)
			}
			start := func(s Scorer, self string) (string, func()) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				if server != nil {
					ln = tls.NewListener(ln, server)
				}
				srv := &http.Server{Handler: NewHandler(Options{Scorer: s, Dim: 2, Token: []byte("tok"), Self: self, Client: client, Timeout: time.Second})}
				go srv.Serve(ln) //nolint:errcheck
				return ln.Addr().String(), func() { srv.Close() }
			}
			owner := &fakeScorer{answer: answer}
			ownerAddr, stopOwner := start(owner, "owner")
			defer stopOwner()
			elsewhere := &processor.ScoreError{Outcome: processor.ScoreElsewhere, Partition: 1, Owner: ownerAddr, OwnerID: "pod-b", Msg: "owned by pod-b"}
			front := &fakeScorer{err: elsewhere}
			frontAddr, stopFront := start(front, "front")
			defer stopFront()
			scheme, c := "http://", http.DefaultClient
			if withTLS {
				scheme, c = "https://", &http.Client{Transport: &http.Transport{TLSClientConfig: client}}
			}
			status, hdr, body := post(t, c, scheme+frontAddr+Path, "tok", `{"key":"u1","x":[1,2]}`)
			if status != 200 || strings.TrimSpace(body) != answer || hdr.Get(ServedByHeader) != "owner" {
				t.Fatalf("forwarded: %d %s (served by %q)", status, body, hdr.Get(ServedByHeader))
			}
			if len(owner.keys) != 1 || owner.keys[0] != "u1" {
				t.Fatalf("owner saw %v", owner.keys)
			}
			// The owner's view says the partition moved on: no second hop.
			owner.mu.Lock()
			owner.err = &processor.ScoreError{Outcome: processor.ScoreElsewhere, Partition: 1, Owner: frontAddr, Msg: "owned by pod-a"}
			owner.mu.Unlock()
			status, hdr, body = post(t, c, scheme+frontAddr+Path, "tok", `{"key":"u1","x":[1,2]}`)
			if status != 503 || !strings.Contains(body, `"retryable":true`) || !strings.Contains(body, "forwarded by front") || hdr.Get("Retry-After") == "" {
				t.Fatalf("stale view: %d %s", status, body)
			}
			if len(front.keys) != 2 {
				t.Fatalf("front scored %d times, want 2 (the request came back once?)", len(front.keys))
			}
			// The token travels with the request: a wrong one is refused by the front.
			if status, _, _ := post(t, c, scheme+frontAddr+Path, "nope", `{"key":"u1","x":[1,2]}`); status != 401 {
				t.Fatalf("wrong token: %d", status)
			}
			if withTLS { // no client certificate: refused at the handshake
				bare := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: client.RootCAs}}}
				req, _ := http.NewRequest(http.MethodPost, scheme+frontAddr+Path, strings.NewReader(`{}`))
				if resp, err := bare.Do(req); err == nil {
					resp.Body.Close()
					t.Fatalf("a client without a certificate got %d", resp.StatusCode)
				}
			}
		})
	}
}

// testTLS is one CA's server and client configurations (mutual TLS, a
// certificate for 127.0.0.1 used both ways, as members share theirs).
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// BenchmarkHandler is the HTTP layer's cost per answered request (auth,
// read, decode, encode, counters) over a scorer that answers at once: what
// the endpoint adds to processor's BenchmarkScore.
func BenchmarkHandler(b *testing.B) {
	h := NewHandler(Options{Scorer: &fakeScorer{answer: answer}, Dim: 16, Token: []byte("tok"), Self: "self", Timeout: time.Second})
	x := strings.TrimSuffix(strings.Repeat("0.25,", 16), ",")
	body := `{"key":"user-42","x":[` + x + `]}`
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, Path, nil)
	req.Header.Set("Authorization", "Bearer tok")
	b.ReportAllocs()
	for b.Loop() {
		req.Body = io.NopCloser(strings.NewReader(body))
		rec.Body.Reset()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}
