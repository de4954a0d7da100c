package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// TestManagerServesProbes starts the operator's manager against a real API server and checks that it reports
// healthy and, once its caches have synced, ready.
func TestManagerServesProbes(t *testing.T) {
	// Both reconcilers run, so the Flux CRDs the Flux deployer watches must be installed.
	env := testenv.Start(t, filepath.Join(testenv.RepoRoot(), "internal", "fluxdeployer", "testdata", "crds"))
	o := parseRunOptions(t, "--metrics-addr=0", "--health-addr="+testenv.FreeAddr(t))
	o.reuseControllerNames = true
	mgr, err := newManager(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunManager(t, mgr)
	for _, probe := range []string{"healthz", "readyz"} {
		url := fmt.Sprintf("http://%s/%s", o.healthAddr, probe)
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never answered 200 (last: %v)", url, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func TestManagerRejectsUnknownControllers(t *testing.T) {
	if _, err := newManager(&rest.Config{Host: "127.0.0.1:1"}, runOptions{metricsAddr: "0", healthAddr: "0", controllers: []string{"nonexistent"}}); err == nil {
		t.Fatal("an unknown --controllers name was accepted")
	}
}

// parseRunOptions returns the options of run as the command line args sets them.
func parseRunOptions(t *testing.T, args ...string) runOptions {
	t.Helper()
	o := runOptions{}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}
