package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads the YAML file path over the defaults, then applies the
// environment overrides of os.Environ. It does not validate: call Validate.
// An empty path means defaults plus environment.
func Load(path string) (Config, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(&cfg, data, path); err != nil {
			return Config{}, err
		}
	}
	if err := ApplyEnv(&cfg, os.Environ()); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Parse decodes YAML data (named name in errors) over the defaults, without
// environment overrides.
func Parse(data []byte, name string) (Config, error) {
	cfg := Default()
	if err := decodeYAML(&cfg, data, name); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func decodeYAML(cfg *Config, data []byte, name string) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: defaults
		}
		return fmt.Errorf("config: %s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %s:%d: only one YAML document is allowed", name, extra.Line)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	if err := checkKeys(root, reflect.TypeOf(Config{}), "", name); err != nil {
		return err
	}
	cfg.src = &source{file: name, lines: map[string]int{}}
	recordLines(root, "", cfg.src.lines)
	if err := root.Decode(cfg); err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	return nil
}

// checkKeys walks the YAML mapping against the struct type t and rejects the
// first key that names no field, with its full path and file:line. Maps
// (model.params) accept any key: the algorithm checks its own params.
func checkKeys(n *yaml.Node, t reflect.Type, prefix, file string) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == durationType {
		return checkLeaf(n, t, prefix, file)
	}
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		where := prefix
		if where == "" {
			where = "the top level"
		}
		return fmt.Errorf("config: %s:%d: %s must be a mapping", file, n.Line, where)
	}
	fields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name := yamlName(f); name != "-" {
			fields[name] = f
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		f, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			sort.Strings(known)
			return fmt.Errorf("config: %s:%d: unknown key %s (known here: %s)%s", file, k.Line, path, strings.Join(known, ", "),
				didYouMean(func(key Key) bool { return key.Path != path && lastPart(key.Path) == k.Value }))
		}
		if seen[k.Value] {
			return fmt.Errorf("config: %s:%d: key %s given twice", file, k.Line, path)
		}
		seen[k.Value] = true
		if err := checkKeys(v, f.Type, path, file); err != nil {
			return err
		}
	}
	return nil
}

// didYouMean names the keys that match, for an unknown key whose name exists
// in another section (kafka.compression for output.compression).
func didYouMean(match func(Key) bool) string {
	var hits []string
	for _, k := range keyTable {
		if match(k) {
			hits = append(hits, k.Path)
		}
	}
	if len(hits) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(hits, " or ") + "?"
}

func lastPart(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

// ApplyEnv applies the KERNELSTREAM_* variables of environ ("NAME=value"
// pairs) to cfg. A KERNELSTREAM_ variable that names no key is an error, like
// an unknown key in the file.
func ApplyEnv(cfg *Config, environ []string) error {
	byEnv := make(map[string]Key, len(keyTable))
	for _, k := range keyTable {
		byEnv[k.Env] = k
	}
	root := reflect.ValueOf(cfg).Elem()
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		k, known := byEnv[name]
		if !known {
			_, rest, _ := strings.Cut(strings.TrimPrefix(name, EnvPrefix), "_")
			return fmt.Errorf("config: environment variable %s names no configuration key (see Keys / docs/operations.md)%s", name,
				didYouMean(func(key Key) bool { return rest != "" && strings.HasSuffix(key.Env, "_"+rest) }))
		}
		if err := setString(root.FieldByIndex(k.index), value); err != nil {
			return fmt.Errorf("config: %s (%s): %w", name, k.Path, err)
		}
		if cfg.src == nil {
			cfg.src = &source{lines: map[string]int{}}
		}
		if cfg.src.env == nil {
			cfg.src.env = map[string]string{}
		}
		cfg.src.env[k.Path] = name
	}
	return nil
}
