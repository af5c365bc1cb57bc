package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "KERNELSTREAM_"

// Key describes one configuration leaf.
type Key struct {
	// Path is the dotted YAML path, e.g. "kafka.tls.ca_file".
	Path string
	// Env is the environment variable that overrides it,
	// e.g. "KERNELSTREAM_KAFKA_TLS_CA_FILE".
	Env string
	// Type is a short type name: string, list, bool, int, float, duration, object.
	Type string
	// Default is the default value as it would be written in YAML (`""` when empty).
	Default string
	// Doc says what the key does.
	Doc   string
	index []int
}

// modelDocs documents the model spec's fields (models.Spec has no doc tags).
var modelDocs = map[string]string{
	"model.algorithm":     "learner name: kogd aogd-ald kons nons-ald fogd nogd forks kawv pkawv-taylor pkawv-nystrom bkb gp-ucb oks oks++ ioks rf-oks++ rf-ioks",
	"model.dim":           "input dimension d: the length of every x",
	"model.loss":          "square, absolute, hinge, squared-hinge or logistic; empty = the algorithm's default",
	"model.kernel.type":   "gaussian, laplacian, polynomial or linear",
	"model.kernel.sigma":  "width of the gaussian/laplacian kernel; 0 = 1",
	"model.kernel.degree": "degree of the polynomial kernel; 0 = 2",
	"model.kernel.c":      "offset of the polynomial kernel; 0 = 1",
	"model.params":        "the algorithm's hyper-parameters named after the papers' symbols (env: a JSON object); unknown names are an error",
	"model.seed":          "mixed with each routing key to seed that key's PRNG",
	"model.scale.x":       "online feature scaling: standard (running mean/variance) or none; empty = standard (bandits: none)",
	"model.scale.y":       "online target scaling: standard or none; empty = standard for the square loss, else none",
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	keyTable     = buildKeys()
)

// Keys lists every configuration key with its environment variable, default
// and documentation, in file order.
func Keys() []Key { return append([]Key(nil), keyTable...) }

// yamlName is the key a struct field has in YAML (yaml.v3's rule: the tag's
// name, else the lower-cased field name); "-" means none.
func yamlName(f reflect.StructField) string {
	if tag, ok := f.Tag.Lookup("yaml"); ok {
		name, _, _ := strings.Cut(tag, ",")
		if name != "" {
			return name
		}
	}
	if !f.IsExported() {
		return "-"
	}
	return strings.ToLower(f.Name)
}

func isLeaf(t reflect.Type) bool { return t.Kind() != reflect.Struct || t == durationType }

func buildKeys() []Key {
	def := reflect.ValueOf(Default())
	var keys []Key
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := yamlName(f)
			if name == "-" {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			idx := append(append([]int(nil), index...), i)
			if !isLeaf(f.Type) {
				walk(f.Type, path, idx)
				continue
			}
			doc := f.Tag.Get("doc")
			if d, ok := modelDocs[path]; ok {
				doc = d
			}
			keys = append(keys, Key{
				Path:    path,
				Env:     EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")),
				Type:    typeName(f.Type),
				Default: formatValue(def.FieldByIndex(idx)),
				Doc:     doc,
				index:   idx,
			})
		}
	}
	walk(reflect.TypeOf(Config{}), "", nil)
	return keys
}

func typeName(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Map:
		return "object"
	}
	panic("config: unsupported field type " + t.String())
}

// formatValue renders a default as it would be written in YAML: "" for
// empty, lists comma-separated, durations without zero units ("1h", not
// "1h0m0s").
func formatValue(v reflect.Value) string {
	s := formatRaw(v)
	if s == "" {
		return `""`
	}
	return s
}

func formatRaw(v reflect.Value) string {
	if v.Type() == durationType {
		s := v.Interface().(time.Duration).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	case reflect.Map:
		if v.Len() == 0 {
			return ""
		}
		b, _ := json.Marshal(v.Interface())
		return string(b)
	case reflect.String:
		return v.String()
	}
	return fmt.Sprint(v.Interface())
}

// setString parses s into the leaf v (the environment override syntax:
// lists comma-separated, durations as "5s", objects as JSON).
func setString(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("want a duration like 5s or 1m30s: %w", err)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Slice:
		var list []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				list = append(list, p)
			}
		}
		v.Set(reflect.ValueOf(list))
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		v.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("want a non-negative integer")
		}
		v.SetUint(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("want a number")
		}
		v.SetFloat(f)
	case reflect.Map:
		m := reflect.New(v.Type())
		dec := json.NewDecoder(strings.NewReader(s))
		if err := dec.Decode(m.Interface()); err != nil {
			return fmt.Errorf("want a JSON object: %w", err)
		}
		v.Set(m.Elem())
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}
