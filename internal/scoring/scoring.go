// Package scoring is the HTTP side of scoring on request (docs/bandits.md,
// "Scoring on request"): POST /v1/score on every member, answered from the
// key's live state by processor.Processor.Score when this member owns the
// key's partition, forwarded once to the owner otherwise. It authenticates
// (bearer token, compared in constant time; TLS and mutual TLS come with
// the listener), bounds and decodes the request (wire.DecodeQuery), maps
// the processor's outcomes onto statuses and counts them.
//
// Statuses: 200 the answer; 400 a bad request (the message names the
// field); 401 no or a wrong token; 405 not POST; 413 a body over
// kafka.max_value_bytes; 421 the owner serves no scoring requests; 422 the
// learner refused x; 500 the key's state is unreadable; 502 the owner did
// not answer a forwarded request; 503 retryable (restoring, moving,
// rebalancing, busy; with Retry-After). Every error body is
// {"error":..., "retryable":bool} with the key's partition and its owner
// when known.
package scoring

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/processor"
)

// Path is the endpoint's path.
const Path = "/v1/score"

// Headers: a request forwarded by a member (never forwarded again), and
// the member whose worker answered.
const (
	ForwardedHeader = "Kernelstream-Forwarded-By"
	ServedByHeader  = "Kernelstream-Served-By"
)

// Scorer answers decoded queries: *processor.Processor.
type Scorer interface {
	Score(ctx context.Context, q *wire.Query, dst []byte) ([]byte, error)
}

// Options configure a Handler.
type Options struct {
	Scorer Scorer
	Dim    int         // model.dim: the length of x
	Limits wire.Limits // the records' limits: body, key, ids
	// Self is this member's advertised scoring address (ServedByHeader,
	// ForwardedHeader).
	Self string
	// Token, when set, must come as "Authorization: Bearer <token>".
	Token []byte
	// Client is the TLS configuration for forwarding to other members
	// (nil: plain HTTP), Timeout bounds a forwarded request.
	Client  *tls.Config
	Timeout time.Duration
	Logger  zerolog.Logger
	// Registerer receives the endpoint's metrics; nil = none.
	Registerer prometheus.Registerer
}

// Outcomes of a request, the label of kernelstream_score_requests_total.
var outcomes = [...]string{"answered", "forwarded", "unavailable", "bad_request", "unauthorized", "refused", "misdirected", "failed", "forward_failed"}

const (
	oAnswered = iota
	oForwarded
	oUnavailable
	oBadRequest
	oUnauthorized
	oRefused
	oMisdirected
	oFailed
	oForwardFailed
)

type handler struct {
	o        Options
	token    [sha256.Size]byte
	client   *http.Client
	scheme   string
	decoders sync.Pool
	bufs     sync.Pool // request bodies
	outs     sync.Pool // answers
	requests [len(outcomes)]prometheus.Counter
	latency  [len(outcomes)]prometheus.Observer
}

// NewHandler returns the endpoint's handler (it serves Path only).
func NewHandler(o Options) http.Handler {
	h := &handler{o: o, scheme: "http"}
	h.o.Limits = o.Limits.WithDefaults()
	if o.Token != nil {
		h.token = sha256.Sum256(o.Token)
	}
	tr := &http.Transport{TLSClientConfig: o.Client, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	if o.Client != nil {
		h.scheme = "https"
	}
	h.client = &http.Client{Transport: tr, Timeout: o.Timeout + time.Second}
	h.decoders.New = func() any { return wire.NewDecoder(o.Dim, h.o.Limits) }
	h.bufs.New = func() any { return new(bytes.Buffer) }
	h.outs.New = func() any { b := make([]byte, 0, 512); return &b }
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kernelstream", Name: "score_requests_total",
		Help: "Scoring requests (POST /v1/score) by outcome: answered here, forwarded to the key's owner, unavailable (503, retryable), bad_request, unauthorized, refused (the learner refused x), misdirected (the owner serves none), failed, forward_failed."},
		[]string{"outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kernelstream", Name: "score_duration_seconds",
		Help:    "Time from a scoring request's arrival to its answer, by outcome (answered: from this member's state).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"outcome"})
	for i, name := range outcomes {
		h.requests[i] = requests.WithLabelValues(name)
		h.latency[i] = latency.WithLabelValues(name)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(requests, latency)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := h.serve(w, r)
	h.requests[outcome].Inc()
	h.latency[outcome].Observe(time.Since(start).Seconds())
}

// errorBody is every error's JSON.
type errorBody struct {
	Error     string `json:"error"`
	Retryable bool   `json:"retryable"`
	Partition *int   `json:"partition,omitempty"`
	Owner     string `json:"owner,omitempty"`    // the owner's scoring address
	OwnerID   string `json:"owner_id,omitempty"` // its identity
}

func (h *handler) fail(w http.ResponseWriter, status int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	if body.Retryable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n')) //nolint:errcheck // the client went away
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) int {
	if r.URL.Path != Path {
		h.fail(w, http.StatusNotFound, errorBody{Error: "not found: the endpoint is POST " + Path})
		return oBadRequest
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, http.StatusMethodNotAllowed, errorBody{Error: "method " + r.Method + ": POST a JSON query"})
		return oBadRequest
	}
	if h.o.Token != nil {
		given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(given))
		if subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kernelstream"`)
			h.fail(w, http.StatusUnauthorized, errorBody{Error: "a valid bearer token is required (Authorization: Bearer <token>)"})
			return oUnauthorized
		}
	}
	buf := h.bufs.Get().(*bytes.Buffer)
	defer h.bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, int64(h.o.Limits.Value)+1)); err != nil {
		h.fail(w, http.StatusBadRequest, errorBody{Error: "reading the body: " + err.Error()})
		return oBadRequest
	}
	body := buf.Bytes()
	if len(body) > h.o.Limits.Value {
		h.fail(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body: above max_value_bytes = %d", h.o.Limits.Value)})
		return oBadRequest
	}
	dec := h.decoders.Get().(*wire.Decoder)
	defer h.decoders.Put(dec)
	q, err := dec.DecodeQuery(body)
	if err != nil {
		h.fail(w, http.StatusBadRequest, errorBody{Error: wire.QueryError(err)})
		return oBadRequest
	}
	out := h.outs.Get().(*[]byte)
	defer h.outs.Put(out)
	answer, err := h.o.Scorer.Score(r.Context(), q, (*out)[:0])
	if err == nil {
		answer = append(answer, '\n')
		*out = answer[:0] // the grown buffer serves the next request
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(ServedByHeader, h.o.Self)
		w.Write(answer) //nolint:errcheck // the client went away
		return oAnswered
	}
	var se *processor.ScoreError
	if !errors.As(err, &se) {
		h.fail(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return oFailed
	}
	eb := errorBody{Error: se.Msg, Retryable: se.Retryable(), Owner: se.Owner, OwnerID: se.OwnerID}
	if se.Partition >= 0 {
		eb.Partition = &se.Partition
	}
	switch se.Outcome {
	case processor.ScoreUnavailable:
		h.fail(w, http.StatusServiceUnavailable, eb)
		return oUnavailable
	case processor.ScoreRefused:
		h.fail(w, http.StatusUnprocessableEntity, eb)
		return oRefused
	case processor.ScoreElsewhere:
		switch {
		case r.Header.Get(ForwardedHeader) != "":
			// The forwarding member's view of the owners is older than
			// this one's: a rebalance is under way. One hop only.
			eb.Error = "forwarded by " + r.Header.Get(ForwardedHeader) + ", but " + se.Msg + " (the group has just rebalanced)"
			eb.Retryable = true
			h.fail(w, http.StatusServiceUnavailable, eb)
			return oUnavailable
		case se.Owner == "":
			h.fail(w, http.StatusMisdirectedRequest, eb)
			return oMisdirected
		}
		return h.forward(w, r, body, se, eb)
	}
	h.fail(w, http.StatusInternalServerError, eb)
	return oFailed
}

// forward sends the request to the owner of the key's partition and relays
// its answer, whatever it is (an owner that is restoring answers 503).
func (h *handler) forward(w http.ResponseWriter, r *http.Request, body []byte, se *processor.ScoreError, eb errorBody) int {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, h.scheme+"://"+se.Owner+Path, bytes.NewReader(body))
	if err != nil {
		eb.Error = "forwarding to " + se.Owner + ": " + err.Error()
		h.fail(w, http.StatusBadGateway, eb)
		return oForwardFailed
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedHeader, h.o.Self)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		// The owner may be restarting or leaving: the partition moves
		// after a rebalance, and the request may then succeed.
		eb.Error = fmt.Sprintf("%s; forwarding to it failed: %v", se.Msg, err)
		eb.Retryable = true
		h.fail(w, http.StatusServiceUnavailable, eb)
		return oForwardFailed
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "Retry-After", ServedByHeader, "WWW-Authenticate"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		h.o.Logger.Debug().Err(err).Str("owner", se.Owner).Msg("relaying a forwarded scoring answer")
	}
	return oForwarded
}

// Server is a running scoring endpoint.
type Server struct {
	srv  *http.Server
	Addr string // the address it listens on
}

// Start serves the endpoint of cfg (serve.*) for p on its own listener,
// with the TLS, client-certificate and token settings of cfg's files.
// reg receives its metrics. Close it with Shutdown.
func Start(cfg config.Config, p Scorer, logger zerolog.Logger, reg prometheus.Registerer) (*Server, error) {
	sec, err := cfg.Serve.Security()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Serve.Addr)
	if err != nil {
		return nil, fmt.Errorf("serve.addr: %w", err)
	}
	if sec.Server != nil {
		ln = tls.NewListener(ln, sec.Server)
	}
	h := NewHandler(Options{Scorer: p, Dim: cfg.Model.Dim, Self: cfg.Serve.Advertised(), Token: sec.Token, Client: sec.Client,
		Timeout: cfg.Serve.Timeout, Logger: logger, Registerer: reg,
		Limits: wire.Limits{Value: cfg.Kafka.MaxValueBytes, Key: cfg.Kafka.MaxKeyBytes, ID: cfg.Kafka.MaxIDBytes}})
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: nil}, Addr: ln.Addr().String()}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error().Err(err).Str("addr", cfg.Serve.Addr).Msg("scoring server failed")
		}
	}()
	logger.Info().Str("addr", s.Addr).Str("advertised", cfg.Serve.Advertised()).Bool("tls", sec.Server != nil).
		Bool("client_certificates", sec.Server != nil && sec.Server.ClientCAs != nil).Bool("token", sec.Token != nil).
		Msg("serving POST " + Path)
	return s, nil
}

// Shutdown stops the server, waiting up to a second for the requests in
// flight.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx) //nolint:errcheck // best effort on the way out
}
