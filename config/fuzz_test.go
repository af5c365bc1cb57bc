package config

import (
	"strings"
	"testing"
)

// FuzzParse: no YAML input makes Parse or Validate panic, and whatever
// parses renders (String) to YAML that parses again to the same rendering.
func FuzzParse(f *testing.F) {
	f.Add(validYAML)
	f.Add("kafka:\n  grup: x\n")
	f.Add("model: {algorithm: aogd-ald, dim: 3, params: {U: [1, {a: b}]}}\n")
	f.Add("a: &x {b: *x}\n")
	f.Add("kafka: {brokers: a:1, tls: ~}\nlabels: {ttl: 5}\n")
	f.Add("---\n---\n")
	f.Fuzz(func(t *testing.T, data string) {
		c, err := Parse([]byte(data), "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("error without the config prefix: %v", err)
			}
			return
		}
		_ = c.Validate()
		text := c.String()
		c2, err := Parse([]byte(text), "again")
		if err != nil {
			t.Fatalf("String() output does not parse: %v\n%s", err, text)
		}
		if c2.String() != text {
			t.Fatalf("rendering not stable:\n%s\n---\n%s", text, c2.String())
		}
	})
}
