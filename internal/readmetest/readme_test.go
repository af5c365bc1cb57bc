// Package readmetest runs the commands of README.md that can run on any
// machine without a cluster, so that a newcomer's copy and paste works:
// offline evaluation (on the shared datasets when present), the producer
// against an embedded broker, configuration checks and -version.
package readmetest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/testbin"
)

const root = "../.."

// notHermetic are the README commands this test does not run, each with
// the reason; a README command matching none of them and none of the runners
// below fails the test, so the README cannot gain an unchecked command.
var notHermetic = []struct{ prefix, why string }{
	{"make run", "the interactive demo (cmd/consumer's demo tests cover it)"},
	{"make test", "this test is part of it"},
	{"make broker", "runs until Ctrl-C (cmd/broker's tests cover it)"},
	{"go run ./cmd/consumer -config config.yaml -check", ""}, // run below with the README's YAML as config.yaml
	{"go run ./cmd/consumer -config config.yaml", "the service: needs a cluster"},
	{"go run ./cmd/consumer -config examples/local.yaml", "the service: needs the broker of make broker"},
	{"go run ./cmd/consumer -dump-state DIR", "DIR is a placeholder for a stopped consumer's directory"},
}

func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := shellCommands(string(readme))
	if len(cmds) < 5 {
		t.Fatalf("found %d commands in README.md", len(cmds))
	}
	bin := testbin.Build(t, root, "readmetest", "./cmd/eval", "./cmd/produce", "./cmd/consumer")
	configYAML := yamlBlock(string(readme))
	for _, c := range cmds {
		t.Run(c.text, func(t *testing.T) {
			words, err := splitWords(c.text)
			if err != nil {
				t.Fatalf("README.md:%d: %v", c.line, err)
			}
			switch {
			case hasPrefix(words, "go", "run", "./cmd/consumer", "-config", "config.yaml", "-check"):
				dir := t.TempDir()
				cfg := strings.Replace(configYAML, "dir: /var/lib/kernelstream", "dir: "+filepath.Join(dir, "state"), 1)
				if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
				runBin(t, c, dir, filepath.Join(bin, "consumer"), words[3:])
			case hasPrefix(words, "go", "run", "./cmd/consumer", "-config", "examples/local.yaml", "-check"),
				hasPrefix(words, "go", "run", "./cmd/consumer", "-version"):
				runBin(t, c, root, filepath.Join(bin, "consumer"), words[3:])
			case hasPrefix(words, "go", "run", "./cmd/eval"):
				args := words[3:]
				if data := flagValue(args, "-data"); data != "" {
					if _, err := os.Stat(filepath.Join(root, data)); err != nil {
						t.Skipf("README.md:%d: %s is absent (the shared datasets live beside the repository)", c.line, data)
					}
					// The command as written, on the first records only: the
					// flags, the spec and the file are what is checked here;
					// the full figures are the README's tables.
					args = append(args, "-limit", "300", "-repeat", "1")
				}
				runBin(t, c, root, filepath.Join(bin, "eval"), args)
			case hasPrefix(words, "go", "run", "./cmd/produce"):
				b, err := broker.Start(broker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				args := words[3:]
				if err := b.CreateTopics(context.Background(), 4, flagValue(args, "-topic")); err != nil {
					t.Fatal(err)
				}
				args = replaceFlag(args, "-brokers", b.Addrs()[0])
				if flagValue(args, "-n") == "" {
					args = append(args, "-n", "50") // the README's stream runs until Ctrl-C
				}
				runBin(t, c, root, filepath.Join(bin, "produce"), args)
				if msgs, err := broker.ReadAll(context.Background(), b.Addrs(), flagValue(args, "-topic")); err != nil || len(msgs) < 50 {
					t.Errorf("README.md:%d: %d records on the topic, %v", c.line, len(msgs), err)
				}
			default:
				for _, nh := range notHermetic {
					if strings.HasPrefix(strings.Join(words, " "), nh.prefix) {
						t.Skipf("README.md:%d: not run here: %s", c.line, nh.why)
					}
				}
				t.Errorf("README.md:%d: %q is neither run by this test nor listed as not hermetic", c.line, c.text)
			}
		})
	}
}

func runBin(t *testing.T, c command, dir, bin string, args []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil {
		t.Errorf("README.md:%d: %s: %v\n%s", c.line, c.text, err, out)
	}
}

// command is one shell command of a ```sh block, continuation lines joined
// and the trailing comment dropped.
type command struct {
	text string
	line int
}

var fence = regexp.MustCompile("(?s)```sh\n(.*?)```")

func shellCommands(md string) []command {
	var cmds []command
	for _, m := range fence.FindAllStringSubmatchIndex(md, -1) {
		block := md[m[2]:m[3]]
		line := strings.Count(md[:m[2]], "\n") + 1
		sc := bufio.NewScanner(strings.NewReader(block))
		var cur strings.Builder
		start := 0
		for i := 0; sc.Scan(); i++ {
			l := sc.Text()
			if cur.Len() == 0 {
				start = line + i
			}
			if strings.HasSuffix(l, "\\") {
				cur.WriteString(strings.TrimSuffix(l, "\\"))
				continue
			}
			cur.WriteString(l)
			if text := strings.TrimSpace(stripComment(cur.String())); text != "" {
				cmds = append(cmds, command{text: text, line: start})
			}
			cur.Reset()
		}
	}
	return cmds
}

// stripComment drops a # comment that starts a word outside quotes.
func stripComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// splitWords splits like a POSIX shell for the README's needs: single
// quotes keep everything, double quotes keep everything but \" and \\.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}

func hasPrefix(words []string, prefix ...string) bool {
	if len(words) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if words[i] != p {
			return false
		}
	}
	return true
}

func flagValue(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}

func replaceFlag(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == name {
			out[i+1] = value
		}
	}
	return out
}

// yamlBlock is the README's minimal configuration (its first ```yaml block).
func yamlBlock(md string) string {
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(md)
	if m == nil {
		return ""
	}
	return m[1]
}
