package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const regressionData = "0.5 1:0.1 2:-0.3\r\n\n# comment\n0.7 1:0.4 2:0.2\n0.1 2:0.9\n0.3 1:-0.5 2:0.5\n"

func TestEvalErrorsExitTwoWithOneLine(t *testing.T) {
	good := writeFile(t, "good.libsvm", regressionData)
	bad := writeFile(t, "bad.libsvm", "0.5 1:0.1\n0.7 1:zz\n")
	spec := `{"algorithm":"kogd","dim":2,"kernel":{"sigma":1}}`
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"-data", "/nonexistent/file.libsvm", "-model", spec}, "no such file"},
		{"malformed line", []string{"-data", bad, "-model", spec}, "bad.libsvm:2"},
		{"unknown algorithm", []string{"-data", good, "-model", `{"algorithm":"nope","dim":2}`}, `unknown algorithm "nope"`},
		{"unknown param", []string{"-data", good, "-model", `{"algorithm":"kogd","dim":2,"params":{"bogus":1}}`}, "unknown params bogus"},
		{"unknown spec field", []string{"-data", good, "-model", `{"algorithm":"kogd","dim":2,"colour":1}`}, "colour"},
		{"dimension mismatch", []string{"-data", good, "-model", `{"algorithm":"kogd","dim":1}`}, "exceeds dimension 1"},
		{"no model", []string{"-data", good}, "-model is required"},
		{"bad repeat", []string{"-data", good, "-model", spec, "-repeat", "0"}, "-repeat"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errb.String())
			}
			msg := errb.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "eval: ") {
				t.Errorf("want one line starting 'eval: ', got %q", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not mention %q", msg, c.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout not empty: %q", out.String())
			}
		})
	}
}

func TestEvalPrintsOneJSONObjectAndDumps(t *testing.T) {
	data := writeFile(t, "r.libsvm", regressionData)
	dump := filepath.Join(t.TempDir(), "dump.txt")
	var out, errb bytes.Buffer
	code := run([]string{"-data", data, "-model", `{"algorithm":"kogd","dim":2,"kernel":{"sigma":1}}`, "-scale", "-repeat", "3", "-shuffle", "7", "-dump", dump}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r map[string]any
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	for _, f := range []string{"algorithm", "n", "repeats", "mse", "mse_std", "mistake_rate", "mistake_rate_std", "mean_loss", "budget", "seconds", "updates_per_second"} {
		if _, ok := r[f]; !ok {
			t.Errorf("field %s missing from %v", f, r)
		}
	}
	if r["n"].(float64) != 4 || r["repeats"].(float64) != 3 || r["mistake_rate"] != nil {
		t.Errorf("unexpected result %v", r)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "0 ") {
		t.Errorf("dump has %d lines: %q", len(lines), b)
	}
}

func TestEvalMistakeRateOnBinaryData(t *testing.T) {
	data := writeFile(t, "c.csv", "label,a,b\n1,0.1,0.2\n0,-0.4,0.1\n1,0.3,0.3\n0,-0.2,-0.5\n")
	var out, errb bytes.Buffer
	if code := run([]string{"-data", data, "-model", `{"algorithm":"kogd","dim":2}`}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		MistakeRate *float64 `json:"mistake_rate"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.MistakeRate == nil || *r.MistakeRate < 0 || *r.MistakeRate > 1 {
		t.Errorf("mistake_rate %v", r.MistakeRate)
	}
}

// A learner whose loss overflows is reported (mse null, named in
// non_finite), never a crash of the JSON encoder on NaN/Inf (issue 12).
func TestEvalReportsNonFiniteMetrics(t *testing.T) {
	data := writeFile(t, "huge.libsvm", "1e200 1:0.5 2:0.1\n-1e200 1:0.2 2:0.3\n1e200 1:0.1 2:0.9\n")
	var out, errb bytes.Buffer
	if code := run([]string{"-data", data, "-model", `{"algorithm":"kogd","dim":2}`, "-quiet"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res["mse"] != nil || !strings.Contains(out.String(), `"non_finite":["mse"`) {
		t.Fatalf("want mse null and named in non_finite: %s", out.String())
	}
}
