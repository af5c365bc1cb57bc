package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// source remembers where each key of a loaded configuration came from, so
// that Validate can point at the file line (or the environment variable) of
// a bad value instead of naming the key alone.
type source struct {
	file  string
	lines map[string]int    // dotted key path -> line of the key in file
	env   map[string]string // dotted key path -> environment variable that set it
}

// recordLines walks a YAML mapping and records the line of every key under
// its dotted path (model.params.mu included).
func recordLines(n *yaml.Node, prefix string, lines map[string]int) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		lines[path] = k.Line
		recordLines(v, path, lines)
	}
}

// where returns "file:line: " or "KERNELSTREAM_X: " for key (or its closest
// recorded parent), or "" when the key kept its default.
func (s *source) where(key string) string {
	if s == nil {
		return ""
	}
	key = indexSuffix.ReplaceAllString(key, "")
	for k := key; k != ""; k = parentKey(k) {
		if name, ok := s.env[k]; ok {
			return name + ": "
		}
		if line, ok := s.lines[k]; ok {
			return fmt.Sprintf("%s:%d: ", s.file, line)
		}
	}
	return ""
}

var indexSuffix = regexp.MustCompile(`\[\d+\]`)

func parentKey(k string) string {
	i := strings.LastIndexByte(k, '.')
	if i < 0 {
		return ""
	}
	return k[:i]
}

// modelErrorKey finds the spec field a model-spec error is about, so that
// the error can point at its line: params.<name>, "unknown params a, b",
// or the field the message names.
func modelErrorKey(msg string) string {
	if m := paramRef.FindStringSubmatch(msg); m != nil {
		return "model.params." + m[1]
	}
	if m := unknownParams.FindStringSubmatch(msg); m != nil {
		return "model.params." + m[1]
	}
	for _, f := range []string{"algorithm", "dim", "loss", "sigma", "degree", "kernel", "seed"} {
		if strings.Contains(msg, f) {
			if f == "sigma" || f == "degree" {
				return "model.kernel." + f
			}
			return "model." + f
		}
	}
	return "model"
}

var (
	paramRef      = regexp.MustCompile(`params\.([A-Za-z_][A-Za-z0-9_]*)`)
	unknownParams = regexp.MustCompile(`unknown params ([A-Za-z_][A-Za-z0-9_]*)`)
)

// checkLeaf checks that a scalar or list node decodes into the field type
// t, and says what is expected when it does not: yaml.v3's own message
// ("cannot unmarshal !!int `5` into time.Duration") names neither the key
// nor the fix.
func checkLeaf(n *yaml.Node, t reflect.Type, path, file string) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	bad := func(want string) error {
		return fmt.Errorf("config: %s:%d: %s: %s is not %s", file, n.Line, path, describe(n), want)
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			return bad("a duration (e.g. 5s, 250ms, 1m30s)")
		}
		if _, err := time.ParseDuration(n.Value); err != nil {
			if _, numErr := strconv.ParseFloat(n.Value, 64); numErr == nil {
				return fmt.Errorf("config: %s:%d: %s: %s has no unit; write a duration such as %ss or %sms", file, n.Line, path, n.Value, n.Value, n.Value)
			}
			return bad("a duration (e.g. 5s, 250ms, 1m30s)")
		}
		return nil
	}
	if isInteger(t) && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
		// yaml.v3 would truncate 3.5 to 3 (and take 3.0 and 1e3) where
		// the environment override refuses them: refused here too.
		return bad(expected(t))
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return bad(expected(t))
	}
	return nil
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "this value"
}

func expected(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list such as [a, b] of " + strings.TrimPrefix(expected(t.Elem()), "a ") + "s"
	case reflect.Map:
		return "a mapping"
	}
	return "a " + t.String()
}
