package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/testbin"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// scoreAnswer is an answer of POST /v1/score as a client reads it.
type scoreAnswer struct {
	wire.Output
	Fresh bool `json:"fresh"`
}

// scoreClient posts queries with the members' bearer token.
type scoreClient struct {
	token string
	c     *http.Client
}

func (sc scoreClient) post(addr, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/score", strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+sc.token)
	resp, err := sc.c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// TestScoreMatchesEval is issue 33's process-level check of scoring on
// request. Two members (separate processes, serve.addr and a bearer token
// each) consume a stream of labelled records for six keys on four
// partitions. Then, for every key and to either member, POST /v1/score
// answers exactly what `eval -key KEY` predicts for that x after the key's
// records (the x appended as the key's last record): the prediction (to
// 1e-12, as TestOutputEqualsEvalDump compares), and the ranking of three
// arms (eval run once per arm), with n_updates equal to the key's labels
// and the offset the partition's end. Half of the answers are forwarded
// (the other member owns the key's partition), which the served-by header
// shows. A key never seen gets a fresh learner's answer, marked fresh.
//
// Then member b stops while requests keep going to a: each answer is
// either the same answer as before the rebalance, or 503 with
// retryable:true and Retry-After; some are 503 (the rebalance and a's
// restore of b's partitions), none is wrong; once a holds every partition
// it answers every key itself.
func TestScoreMatchesEval(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end multi-process test")
	}
	const keys, rounds, partitions = 6, 40, 4
	ctx, _, addr := startBroker(t, 2*time.Minute, partitions, "features", "out-score", "dlq-score")
	dir := t.TempDir()
	evalBin := filepath.Join(testbin.Build(t, "../..", "consumer-eval", "./cmd/eval"), "eval")

	// The stream: round-robin over the keys, each round's labels after
	// its features (the order TestOutputEqualsEvalDump checks eval on).
	perKey, order := examplesPerKey(t, keys, rounds, 33)
	var msgs []kafka.Message
	for r := 0; r < rounds; r++ {
		for _, k := range order {
			msgs = append(msgs, kafka.Message{Key: []byte(k), Value: record(perKey[k][r], false)})
		}
		for _, k := range order {
			e := perKey[k][r]
			msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte(fmt.Sprintf(`{"id":%q,"y":%s}`, e.ID(), num(e.Y)))})
		}
	}
	produceMessages(ctx, t, addr, "features", msgs)
	_, ends, err := endOffsets(ctx, addr, "features", partitions)
	if err != nil {
		t.Fatal(err)
	}

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("members-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := scoreClient{token: "members-token", c: &http.Client{Timeout: 10 * time.Second}}
	serveAddr := map[string]string{"a": freeAddr(t), "b": freeAddr(t)}
	procs := map[string]*consumerProcess{}
	for _, name := range []string{"a", "b"} {
		extra := fmt.Sprintf("serve:\n  addr: %s\n  token_file: %s\n", serveAddr[name], tokenFile)
		cfg := writeConfig(t, dir, name+".yaml", fmtConfig(addr, "score", "out-score", "dlq-score", filepath.Join(dir, "state-"+name), extra))
		procs[name] = startConsumer(t, cfg, filepath.Join(dir, name+".log"), "POD_NAME="+name)
	}
	defer func() {
		for _, p := range procs {
			p.cmd.Process.Kill() //nolint:errcheck // already stopped, mostly
		}
	}()
	for {
		g, err := describeGroup(ctx, addr, "score")
		ok, cerr := caughtUp(ctx, addr, "score", "features", partitions)
		if err == nil && g.stableOn(2, partitions) && g.hasMembers("a", "b") && cerr == nil && ok {
			t.Logf("group stable and caught up: %s", g)
			break
		}
		for name, p := range procs {
			select {
			case err := <-p.done:
				t.Fatalf("member %s exited (%v):\n%s", name, err, tail(p.log, 3000))
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group did not settle (%v, %v)", g, err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// What eval says, per key: the prediction for each arm's x after the
	// key's records, and the ranking of the arms by it.
	spec := `{"algorithm":"aogd-ald","dim":5,"kernel":{"type":"gaussian","sigma":1},"params":{"max_budget":64},"seed":3}`
	arms := [][]float64{{0.3, -0.2, 0.5, 0.1, -0.4}, {-0.6, 0.2, 0.0, 0.7, 0.3}, {0.1, 0.1, -0.3, -0.2, 0.9}}
	armsJSON := make([]string, len(arms))
	for i, x := range arms {
		xs, _ := json.Marshal(x)
		armsJSON[i] = fmt.Sprintf(`{"id":"arm-%d","x":%s}`, i, xs)
	}
	type expected struct {
		yhat    []float64 // per arm
		ranking []string
	}
	want := map[string]expected{}
	for _, k := range order {
		var e expected
		for _, x := range arms {
			ex := append(append([]synth.Example(nil), perKey[k]...), synth.Example{Key: k, X: x})
			dump := evalDump(t, evalBin, dir, spec, k, ex)
			e.yhat = append(e.yhat, dump[len(dump)-1])
		}
		idx := []int{0, 1, 2}
		sort.SliceStable(idx, func(a, b int) bool { return e.yhat[idx[a]] > e.yhat[idx[b]] })
		for _, i := range idx {
			e.ranking = append(e.ranking, fmt.Sprintf("arm-%d", i))
		}
		want[k] = e
	}
	x0, _ := json.Marshal(arms[0])
	predictQuery := func(k string) string { return fmt.Sprintf(`{"key":%q,"x":%s}`, k, x0) }
	rankQuery := func(k string) string { return fmt.Sprintf(`{"key":%q,"arms":[%s]}`, k, strings.Join(armsJSON, ",")) }
	// check compares one 200 answer with eval; "" when it agrees.
	check := func(k string, body []byte, ranking bool) string {
		var a scoreAnswer
		if err := json.Unmarshal(body, &a); err != nil || a.YHat == nil {
			return fmt.Sprintf("answer %s: %v", body, err)
		}
		var ids []string
		for _, id := range a.Ranking {
			ids = append(ids, id.String())
		}
		wantY := want[k].yhat[0]
		if ranking {
			wantY = want[k].yhat[wantRankFirst(want[k].ranking)]
		}
		switch {
		case a.Fresh || a.NUpdates != rounds:
			return fmt.Sprintf("key %s: fresh %v, n_updates %d, want %d: %s", k, a.Fresh, a.NUpdates, rounds, body)
		case math.Abs(*a.YHat-wantY) > 1e-12:
			return fmt.Sprintf("key %s: y_hat %v, eval %v: %s", k, *a.YHat, wantY, body)
		case ranking && strings.Join(ids, ",") != strings.Join(want[k].ranking, ","):
			return fmt.Sprintf("key %s: ranking %v, eval's %v: %s", k, ids, want[k].ranking, body)
		case a.Offset != ends[a.Partition]:
			return fmt.Sprintf("key %s: offset %d, the partition's end is %d", k, a.Offset, ends[a.Partition])
		}
		return ""
	}

	forwarded := 0
	for _, k := range order {
		for _, member := range []string{"a", "b"} {
			for _, ranking := range []bool{false, true} {
				q := predictQuery(k)
				if ranking {
					q = rankQuery(k)
				}
				status, hdr, body, err := sc.post(serveAddr[member], q)
				if err != nil || status != 200 {
					t.Fatalf("key %s to %s: %d %s %v; log tail:\n%s", k, member, status, body, err, tail(procs[member].log, 3000))
				}
				if msg := check(k, body, ranking); msg != "" {
					t.Fatal(msg)
				}
				if hdr.Get("Kernelstream-Served-By") != serveAddr[member] {
					forwarded++
				}
			}
		}
	}
	if forwarded == 0 || forwarded == 4*keys {
		t.Fatalf("%d of %d answers forwarded: the keys' partitions should be on both members", forwarded, 4*keys)
	}
	t.Logf("%d answers equal eval -key (%d of them forwarded to the owner)", 4*keys, forwarded)
	if status, _, body, _ := sc.post(serveAddr["a"], predictQuery("never-seen")); status != 200 || !strings.Contains(string(body), `"n_updates":0`) ||
		!strings.Contains(string(body), `"fresh":true`) {
		t.Fatalf("a key without state: %d %s", status, body)
	}
	if status, _, body, _ := (scoreClient{token: "wrong", c: sc.c}).post(serveAddr["a"], predictQuery(order[0])); status != 401 {
		t.Fatalf("wrong token: %d %s", status, body)
	}

	// The rebalance: b leaves while requests keep going to a.
	var (
		mu                   sync.Mutex
		ok, retry, aServed   int
		wrong                []string
		stopLoad             = make(chan struct{})
		loadDone             = make(chan struct{})
		allLocalSince        time.Time
		consecutiveAllLocals int
	)
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			default:
			}
			k := order[i%keys]
			status, hdr, body, err := sc.post(serveAddr["a"], predictQuery(k))
			mu.Lock()
			switch {
			case err != nil:
				wrong = append(wrong, fmt.Sprintf("key %s: %v", k, err))
			case status == 200:
				if msg := check(k, body, false); msg != "" {
					wrong = append(wrong, msg)
				}
				ok++
				if hdr.Get("Kernelstream-Served-By") == serveAddr["a"] {
					aServed++
				}
			case status == 503 && strings.Contains(string(body), `"retryable":true`) && hdr.Get("Retry-After") != "":
				retry++
			default:
				wrong = append(wrong, fmt.Sprintf("key %s: status %d %s", k, status, body))
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if code := procs["b"].stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Fatalf("b: exit %d:\n%s", code, tail(procs["b"].log, 3000))
	}
	delete(procs, "b")
	// Until a answers every key itself, several times over.
	for consecutiveAllLocals < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("a never answered every key itself after b left (%d ok, %d retryable, wrong %v)", ok, retry, wrong)
		case <-time.After(100 * time.Millisecond):
		}
		all := true
		for _, k := range order {
			status, hdr, _, err := sc.post(serveAddr["a"], predictQuery(k))
			all = all && err == nil && status == 200 && hdr.Get("Kernelstream-Served-By") == serveAddr["a"]
		}
		if all {
			if consecutiveAllLocals == 0 {
				allLocalSince = time.Now()
			}
			consecutiveAllLocals++
		} else {
			consecutiveAllLocals = 0
		}
	}
	close(stopLoad)
	<-loadDone
	mu.Lock()
	defer mu.Unlock()
	t.Logf("during the rebalance: %d answers equal to eval's (%d by a itself), %d retryable 503s, a alone since %v", ok, aServed, retry, allLocalSince.Format(time.StampMilli))
	if len(wrong) > 0 {
		t.Fatalf("%d wrong answers during the rebalance, e.g. %s", len(wrong), wrong[0])
	}
	if retry == 0 {
		t.Fatal("no request met the rebalance (no 503): the test did not test it")
	}
	if code := procs["a"].stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Fatalf("a: exit %d:\n%s", code, tail(procs["a"].log, 3000))
	}
	delete(procs, "a")
}

// wantRankFirst is the index of the first arm of a ranking "arm-i", ...
func wantRankFirst(ranking []string) int {
	var i int
	fmt.Sscanf(ranking[0], "arm-%d", &i) //nolint:errcheck // the test's own names
	return i
}
