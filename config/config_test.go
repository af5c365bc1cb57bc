package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

const validYAML = `
kafka:
  brokers: [k1:9092, k2:9092]
  group: g
  input_topic: in
  output_topic: out
  dlq_topic: dlq
  labels_topic: labels
  start_offset: latest
  tls:
    enabled: true
    ca_file: /etc/kafka/ca.pem
  sasl:
    mechanism: scram-sha-512
    username: svc
    password_file: /etc/kafka/password
model:
  algorithm: aogd-ald
  dim: 8
  kernel: {type: gaussian, sigma: 2}
  params: {U: 3, T: 5000}
  seed: 7
checkpoint:
  dir: /tmp/ks
  interval: 2s
  max_records: 500
labels:
  ttl: 10m
  max_pending: 1000
cache:
  max_learners: 10
output:
  top_k: 3
http:
  addr: 127.0.0.1:9000
log:
  level: debug
  format: console
shutdown:
  grace: 12s
`

func TestParseFullFile(t *testing.T) {
	c, err := Parse([]byte(validYAML), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"brokers", strings.Join(c.Kafka.Brokers, ","), "k1:9092,k2:9092"},
		{"labels_topic", c.Kafka.LabelsTopic, "labels"},
		{"start_offset", c.Kafka.StartOffset, "latest"},
		{"tls.ca_file", c.Kafka.TLS.CAFile, "/etc/kafka/ca.pem"},
		{"sasl.mechanism", c.Kafka.SASL.Mechanism, "scram-sha-512"},
		{"model.algorithm", c.Model.Algorithm, "aogd-ald"},
		{"model.kernel.sigma", c.Model.Kernel.Sigma, 2.0},
		{"model.params.U", fmt.Sprint(c.Model.Params["U"]), "3"},
		{"model.seed", c.Model.Seed, uint64(7)},
		{"checkpoint.interval", c.Checkpoint.Interval, 2 * time.Second},
		{"labels.ttl", c.Labels.TTL, 10 * time.Minute},
		{"shutdown.grace", c.Shutdown.Grace, 12 * time.Second},
		{"log.format", c.Log.Format, "console"},
		// Keys the file does not mention keep their defaults.
		{"kafka.session_timeout", c.Kafka.SessionTimeout, Default().Kafka.SessionTimeout},
		{"output.batch_timeout", c.Output.BatchTimeout, Default().Output.BatchTimeout},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestUnknownKeysNameKeyAndLine(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"kafka:\n  brokers: [a:1]\n  grup: x\n", "cfg.yaml:3: unknown key kafka.grup"},
		{"kafka:\n  compression: zstd\n", "wrong_partition); did you mean changelog.compression or output.compression?"},
		{"kafka:\n  tls:\n    enabled: true\n    ca: x\n", "cfg.yaml:4: unknown key kafka.tls.ca"},
		{"log:\n  level: info\nlogging: {}\n", "cfg.yaml:3: unknown key logging"},
		{"level: debug\n", "cfg.yaml:1: unknown key level (known here: cache, changelog, checkpoint, http, kafka, labels, log, model, output, serve, shutdown, state); did you mean log.level?"},
		{"model:\n  algorithm: kogd\n  kernel:\n    width: 2\n", "cfg.yaml:4: unknown key model.kernel.width"},
		{"http:\n  addr: :1\n  addr: :2\n", "cfg.yaml:3: key http.addr given twice"},
		{"kafka: 3\n", "cfg.yaml:1: kafka must be a mapping"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), "cfg.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	// model.params is free-form here; the algorithm rejects unknown params.
	c, err := Parse([]byte("model:\n  algorithm: aogd-ald\n  dim: 3\n  params: {nonsense: 1}\n"), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Errorf("unknown model param not rejected: %v", err)
	}
}

func TestTypeErrorNamesKeyLineAndFix(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"checkpoint:\n  max_records: lots\n", []string{"cfg.yaml:2:", "checkpoint.max_records", `"lots" is not an integer`}},
		{"checkpoint:\n  interval: 5\n", []string{"cfg.yaml:2:", "checkpoint.interval", "no unit", "5s"}},
		{"checkpoint:\n  interval: soon\n", []string{"cfg.yaml:2:", "checkpoint.interval", "a duration"}},
		{"kafka:\n  brokers: [a:1]\n  tls:\n    enabled: maybe\n", []string{"cfg.yaml:4:", "kafka.tls.enabled", "true or false"}},
		{"kafka:\n  brokers: {a: 1}\n", []string{"cfg.yaml:2:", "kafka.brokers", "a list such as [a, b] of strings"}},
		{"model:\n  dim: five\n", []string{"cfg.yaml:2:", "model.dim", "an integer"}},
		// yaml.v3 truncates a float into an int field: refused, as the
		// environment override refuses it.
		{"model:\n  algorithm: aogd-ald\n  dim: 3.5\n", []string{"cfg.yaml:3:", "model.dim", `"3.5" is not an integer`}},
		{"checkpoint:\n  max_records: 2.9\n", []string{"cfg.yaml:2:", "checkpoint.max_records", `"2.9" is not an integer`}},
		{"cache:\n  max_learners: 1e3\n", []string{"cfg.yaml:2:", "cache.max_learners", `"1e3" is not an integer`}},
		{"labels:\n  max_pending: 100.0\n", []string{"cfg.yaml:2:", "labels.max_pending", `"100.0" is not an integer`}},
		{"model:\n  seed: 1.5\n", []string{"cfg.yaml:2:", "model.seed", `"1.5" is not a non-negative integer`}},
		{"model:\n  kernel: {type: polynomial, degree: 2.5}\n", []string{"cfg.yaml:2:", "model.kernel.degree", `"2.5" is not an integer`}},
		{"kafka:\n  max_key_bytes: 64.5\n", []string{"cfg.yaml:2:", "kafka.max_key_bytes", `"64.5" is not an integer`}},
	} {
		_, err := Parse([]byte(tc.yaml), "cfg.yaml")
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", tc.yaml, err, w)
			}
		}
	}
}

func TestValidateErrorsPointIntoTheFile(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"kafka:\n  start_offset: middle\nmodel: {algorithm: aogd-ald, dim: 3}\n", "cfg.yaml:2: kafka.start_offset"},
		{"model:\n  algorithm: aogd-ald\n  dim: 3\n  params:\n    nonsense: 1\n", "cfg.yaml:5: model"},
		{"model:\n  algorithm: aogd-lad\n  dim: 3\n", "cfg.yaml:2: model"},
		{"model:\n  algorithm: aogd-ald\n  dim: -3\n", "cfg.yaml:3: model"},
	} {
		c, err := Parse([]byte(tc.yaml), "cfg.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v lacks %q", tc.yaml, err, tc.want)
		}
	}
	c := Default()
	c.Model.Algorithm, c.Model.Dim = "aogd-ald", 3
	if err := ApplyEnv(&c, []string{"KERNELSTREAM_KAFKA_START_OFFSET=middle"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "KERNELSTREAM_KAFKA_START_OFFSET: kafka.start_offset") {
		t.Errorf("env-set key not named: %v", err)
	}
}

// TestRecordLimitsFitTheStore: the limits on keys and ids are checked
// against Badger's key limit and, with the changelog on, against its
// record limit, naming the key where the file sets it; the defaults fit.
func TestRecordLimitsFitTheStore(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string // "" = valid
	}{
		{"model: {algorithm: aogd-ald, dim: 3}\n", ""},
		{"model: {algorithm: aogd-ald, dim: 3}\nkafka:\n  max_key_bytes: 60000\n  max_id_bytes: 4000\n", ""},
		{"model: {algorithm: aogd-ald, dim: 3}\nkafka:\n  max_key_bytes: 70000\n", "cfg.yaml:3: kafka.max_key_bytes: a key of 70000 bytes and an id of 512 make a state store key of up to 70515 bytes, above Badger's limit 64995"},
		{"model: {algorithm: aogd-ald, dim: 3}\nkafka:\n  max_key_bytes: 60000\n  max_id_bytes: 5000\n", "cfg.yaml:3: kafka.max_key_bytes"},
		{"model: {algorithm: aogd-ald, dim: 3}\nkafka:\n  max_key_bytes: 1000\nchangelog:\n  max_message_bytes: 2000\n", "above changelog.max_message_bytes 2000"},
		{"model: {algorithm: aogd-ald, dim: 3}\nkafka:\n  max_key_bytes: 1000\nchangelog:\n  enabled: false\n  max_message_bytes: 2000\n", ""},
	} {
		c, err := Parse([]byte(tc.yaml), "cfg.yaml")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		err = c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	for _, data := range []string{"", "\n# nothing\n", "~\n"} {
		c, err := Parse([]byte(data), "empty.yaml")
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if c.String() != Default().String() {
			t.Errorf("%q: not the defaults", data)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	c, err := Parse([]byte(validYAML), "cfg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=/bin",
		"KERNELSTREAM_KAFKA_BROKERS=a:9092, b:9092",
		"KERNELSTREAM_KAFKA_TLS_ENABLED=false",
		"KERNELSTREAM_KAFKA_TLS_CA_FILE=",
		"KERNELSTREAM_KAFKA_SASL_PASSWORD=s3cret",
		"KERNELSTREAM_KAFKA_SASL_PASSWORD_FILE=",
		"KERNELSTREAM_CHECKPOINT_INTERVAL=1m30s",
		"KERNELSTREAM_CACHE_MAX_LEARNERS=42",
		"KERNELSTREAM_MODEL_DIM=5",
		"KERNELSTREAM_MODEL_SEED=9",
		"KERNELSTREAM_MODEL_KERNEL_SIGMA=0.5",
		`KERNELSTREAM_MODEL_PARAMS={"U": 4}`,
		"KERNELSTREAM_HTTP_ADDR=:9999",
	}
	if err := ApplyEnv(&c, env); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Kafka.Brokers, ","); got != "a:9092,b:9092" {
		t.Errorf("brokers = %q", got)
	}
	if c.Kafka.TLS.Enabled || c.Kafka.SASL.Password.Reveal() != "s3cret" || c.Checkpoint.Interval != 90*time.Second ||
		c.Cache.MaxLearners != 42 || c.Model.Dim != 5 || c.Model.Seed != 9 || c.Model.Kernel.Sigma != 0.5 ||
		c.Model.Params["U"] != 4.0 || len(c.Model.Params) != 1 || c.HTTP.Addr != ":9999" {
		t.Errorf("overrides not applied: %s", c.String())
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	bad := []struct{ env, want string }{
		{"KERNELSTREAM_KAFKA_GRUP=x", "KERNELSTREAM_KAFKA_GRUP names no configuration key"},
		{"KERNELSTREAM_KAFKA_COMPRESSION=zstd", "names no configuration key (see Keys / docs/operations.md); did you mean changelog.compression or output.compression?"},
		{"KERNELSTREAM_CACHE_MAX_LEARNERS=many", "KERNELSTREAM_CACHE_MAX_LEARNERS (cache.max_learners): want an integer"},
		{"KERNELSTREAM_LABELS_TTL=3", "KERNELSTREAM_LABELS_TTL (labels.ttl): want a duration"},
		{"KERNELSTREAM_KAFKA_TLS_ENABLED=yes please", "(kafka.tls.enabled): want true or false"},
		{"KERNELSTREAM_MODEL_PARAMS=[1]", "(model.params): want a JSON object"},
	}
	for _, b := range bad {
		c := Default()
		err := ApplyEnv(&c, []string{b.env})
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want %q", b.env, err, b.want)
		}
	}
}

func TestLoadFileAndEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(validYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KERNELSTREAM_KAFKA_GROUP", "from-env")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Group != "from-env" || c.Kafka.InputTopic != "in" {
		t.Errorf("group %q input %q", c.Kafka.Group, c.Kafka.InputTopic)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	base := func() Config {
		c := Default()
		c.Model.Algorithm, c.Model.Dim = "aogd-ald", 4
		return c
	}
	if c := base(); c.Validate() != nil {
		t.Fatalf("defaults + model invalid: %v", c.Validate())
	}
	cases := []struct {
		key    string
		mutate func(c *Config)
	}{
		{"kafka.brokers", func(c *Config) { c.Kafka.Brokers = nil }},
		{"kafka.brokers[1]", func(c *Config) { c.Kafka.Brokers = []string{"a:1", "nohost"} }},
		{"kafka.group", func(c *Config) { c.Kafka.Group = "" }},
		{"kafka.input_topic", func(c *Config) { c.Kafka.InputTopic = " " }},
		{"kafka.output_topic", func(c *Config) { c.Kafka.OutputTopic = c.Kafka.InputTopic }},
		{"kafka.dlq_topic", func(c *Config) { c.Kafka.DLQTopic = "" }},
		{"kafka.labels_topic", func(c *Config) { c.Kafka.LabelsTopic = c.Kafka.InputTopic }},
		{"kafka.start_offset", func(c *Config) { c.Kafka.StartOffset = "middle" }},
		{"kafka.offset_reset", func(c *Config) { c.Kafka.OffsetReset = "none" }},
		{"kafka.wrong_partition", func(c *Config) { c.Kafka.WrongPartition = "drop" }},
		{"labels.merge_wait", func(c *Config) { c.Labels.MergeWait = 0 }},
		{"labels.max_ts_skew", func(c *Config) { c.Labels.MaxTsSkew = -time.Second }},
		{"kafka.session_timeout", func(c *Config) { c.Kafka.SessionTimeout = 0 }},
		{"kafka.heartbeat_interval", func(c *Config) { c.Kafka.HeartbeatInterval = time.Minute }},
		{"kafka.max_value_bytes", func(c *Config) { c.Kafka.MaxValueBytes = 0 }},
		{"kafka.max_key_bytes", func(c *Config) { c.Kafka.MaxKeyBytes = 0 }},
		{"kafka.max_id_bytes", func(c *Config) { c.Kafka.MaxIDBytes = -1 }},
		{"kafka.tls.enabled", func(c *Config) { c.Kafka.TLS.CAFile = "ca.pem" }},
		{"kafka.tls.cert_file", func(c *Config) { c.Kafka.TLS = TLS{Enabled: true, CertFile: "c.pem"} }},
		{"kafka.sasl.mechanism", func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" }},
		{"kafka.sasl.mechanism", func(c *Config) { c.Kafka.SASL.Username = "u" }},
		{"kafka.sasl.username", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: "plain", Password: "p"} }},
		{"kafka.sasl.password", func(c *Config) { c.Kafka.SASL = SASL{Mechanism: "plain", Username: "u"} }},
		{"kafka.sasl.password", func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "plain", Username: "u", Password: "p", PasswordFile: "f"}
		}},
		{"model.algorithm", func(c *Config) { c.Model.Algorithm = "" }},
		{"model", func(c *Config) { c.Model.Dim = 0 }},
		{"model", func(c *Config) { c.Model.Algorithm = "no-such-learner" }},
		{"checkpoint.dir", func(c *Config) { c.Checkpoint.Dir = "" }},
		{"checkpoint.interval", func(c *Config) { c.Checkpoint.Interval = -time.Second }},
		{"checkpoint.max_records", func(c *Config) { c.Checkpoint.MaxRecords = 0 }},
		{"checkpoint.memtable_mib", func(c *Config) { c.Checkpoint.MemTableMiB = 4 }},
		{"checkpoint.memtable_mib", func(c *Config) { c.Checkpoint.MemTableMiB = 2048 }},
		{"labels.ttl", func(c *Config) { c.Labels.TTL = 0 }},
		{"labels.max_pending", func(c *Config) { c.Labels.MaxPending = -1 }},
		{"state.key_ttl", func(c *Config) { c.State.KeyTTL = -time.Hour }},
		{"changelog.standby_replicas", func(c *Config) { c.Changelog.StandbyReplicas = -1 }},
		{"changelog.compression", func(c *Config) { c.Changelog.Compression = "brotli" }},
		{"changelog.standby_replicas", func(c *Config) { c.Changelog.Enabled, c.Changelog.StandbyReplicas = false, 1 }},
		{"output.delivery", func(c *Config) { c.Changelog.Enabled, c.Output.Delivery = false, "exactly_once" }},
		{"checkpoint.interval", func(c *Config) { c.Output.Delivery, c.Checkpoint.Interval = "exactly_once", time.Minute }},
		{"kafka.isolation_level", func(c *Config) { c.Kafka.IsolationLevel = "read_uncommitted" }},
		{"cache.max_learners", func(c *Config) { c.Cache.MaxLearners = 0 }},
		{"output.top_k", func(c *Config) { c.Output.TopK = -1 }},
		{"output.batch_timeout", func(c *Config) { c.Output.BatchTimeout = -time.Millisecond }},
		{"http.addr", func(c *Config) { c.HTTP.Addr = "8080" }},
		{"serve.addr", func(c *Config) { c.Serve.Addr = "8081" }},
		{"serve.addr", func(c *Config) { c.Serve.Addr = c.HTTP.Addr }},
		{"serve.addr", func(c *Config) { c.Serve.TokenFile = "token" }},
		{"serve.advertised_addr", func(c *Config) { c.Serve = Serve{Addr: ":8081", AdvertisedAddr: ":8081", Timeout: time.Second} }},
		{"serve.tls_cert", func(c *Config) { c.Serve = Serve{Addr: ":8081", TLSKey: "k.pem", Timeout: time.Second} }},
		{"serve.client_ca", func(c *Config) { c.Serve = Serve{Addr: ":8081", ClientCA: "ca.pem", Timeout: time.Second} }},
		{"serve.peer_ca", func(c *Config) { c.Serve = Serve{Addr: ":8081", PeerCA: "ca.pem", Timeout: time.Second} }},
		{"serve.timeout", func(c *Config) { c.Serve = Serve{Addr: ":8081"} }},
		{"log.level", func(c *Config) { c.Log.Level = "loud" }},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }},
		{"shutdown.grace", func(c *Config) { c.Shutdown.Grace = 0 }},
	}
	for _, tc := range cases {
		c := base()
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%s: err = %v", tc.key, err)
		}
	}
	// Every problem is reported, not only the first.
	c := base()
	c.Kafka.Group, c.Log.Level = "", "loud"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.group") || !strings.Contains(err.Error(), "log.level") {
		t.Errorf("err = %v", err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	const pw = "hunter2-very-secret"
	c := Default()
	c.Model.Algorithm, c.Model.Dim = "aogd-ald", 4
	c.Kafka.SASL = SASL{Mechanism: "scram-sha-256", Username: "svc", Password: Secret(pw)}
	var logBuf bytes.Buffer
	logger := zerolog.New(&logBuf)
	logger.Info().Object("config", c).Interface("raw", c).Msg("start")
	js, _ := json.Marshal(c)
	outputs := map[string]string{
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", c),
		"%+v":    fmt.Sprintf("%+v", c),
		"%#v":    fmt.Sprintf("%#v", c),
		"%s sasl": fmt.Sprintf("%s %v %+v %#v %q", c.Kafka.SASL.Password, c.Kafka.SASL, c.Kafka.SASL,
			c.Kafka.SASL, c.Kafka.SASL.Password),
		"json":    string(js),
		"zerolog": logBuf.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, pw) {
			t.Errorf("%s leaks the password: %s", name, out)
		}
		if !strings.Contains(out, Redacted) {
			t.Errorf("%s does not show %s: %s", name, Redacted, out)
		}
	}
	if c.Kafka.SASL.Password.Reveal() != pw {
		t.Error("Reveal lost the value")
	}
	// The redacted rendering is still valid YAML of the same shape.
	if _, err := Parse([]byte(c.String()), "dump"); err != nil {
		t.Errorf("String() does not parse back: %v", err)
	}
}

func TestKeysTable(t *testing.T) {
	keys := Keys()
	envs := map[string]string{}
	paths := map[string]bool{}
	for _, k := range keys {
		if k.Doc == "" {
			t.Errorf("%s has no doc", k.Path)
		}
		if prev, dup := envs[k.Env]; dup {
			t.Errorf("%s and %s share %s", prev, k.Path, k.Env)
		}
		envs[k.Env], paths[k.Path] = k.Path, true
	}
	for _, want := range []string{
		"kafka.brokers", "kafka.group", "kafka.input_topic", "kafka.output_topic", "kafka.dlq_topic",
		"kafka.labels_topic", "kafka.start_offset", "model.algorithm", "model.params", "checkpoint.dir",
		"checkpoint.interval", "checkpoint.max_records", "checkpoint.memtable_mib", "labels.ttl", "labels.max_pending",
		"cache.max_learners", "output.top_k", "http.addr", "log.level", "log.format", "shutdown.grace",
		"kafka.tls.enabled", "kafka.tls.ca_file", "kafka.tls.cert_file", "kafka.tls.key_file",
		"kafka.tls.server_name", "kafka.tls.insecure_skip_verify", "kafka.sasl.mechanism",
		"kafka.sasl.username", "kafka.sasl.password", "kafka.sasl.password_file",
		"serve.addr", "serve.advertised_addr", "serve.tls_cert", "serve.tls_key", "serve.client_ca",
		"serve.peer_ca", "serve.token_file", "serve.timeout",
	} {
		if !paths[want] {
			t.Errorf("key %s missing", want)
		}
	}
}

// TestOperationsDocCoversEveryKey keeps docs/operations.md's reference table
// and its example in step with the code: every key and its environment
// variable appear with their default, and the example YAML validates.
func TestOperationsDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, k := range Keys() {
		row := fmt.Sprintf("| `%s` | `%s` | %s | `%s` | %s |\n", k.Path, k.Env, k.Type, k.Default, strings.ReplaceAll(k.Doc, "|", "\\|"))
		if !strings.Contains(text, row) {
			t.Errorf("docs/operations.md lacks the row\n%s", row)
		}
	}
	m := regexp.MustCompile("(?s)<!-- example-config -->\\s*```yaml\n(.*?)```").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/operations.md has no <!-- example-config --> yaml block")
	}
	c, err := Parse([]byte(m[1]), "docs/operations.md example")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
