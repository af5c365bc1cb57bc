package testparallel

import (
	"flag"
	"os"
	"testing"
)

var given = false

func TestMain(m *testing.M) {
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	Default(7)
	os.Exit(m.Run())
}

func TestDefault(t *testing.T) {
	got := flag.Lookup("test.parallel").Value.String()
	if !given && got != "7" {
		t.Errorf("-test.parallel = %s, want 7 when the command line does not set it", got)
	}
	if given && got == "7" {
		t.Skip("the command line asked for 7")
	}
}
