// Command demo publishes a sample vector — three artifacts, one of which disables reuse — so that fluxdeployer
// can be tried without an OCM toolchain: into a CTF directory (-ctf DIR) and/or into an OCI registry it serves
// itself on a loopback address (-serve ADDR) until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

const (
	helmType      = "cloud.konfidence.flux.helm"
	kustomizeType = "cloud.konfidence.flux.kustomize"
)

func sampleVector() []ocmtest.ComponentVersion {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", "1.2.3+build.5", helmType, true)
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", kustomizeType, true)
	config.Resources[1] = ocmtest.Resource{Name: "bundle", Version: "0.4.0", Type: "kustomize", Access: map[string]string{
		"type": "ociArtifact", "imageReference": "registry.example/bundles/config:0.4.0",
	}}
	database := ocmtest.Artifact("acme.org/artifacts/database", "16.4.0", helmType, false)
	vector := ocmtest.Vector("acme.org/vectors/shop", "1.0.0", frontend, config, database)
	return []ocmtest.ComponentVersion{frontend, config, database, vector}
}

func main() {
	ctf := flag.String("ctf", "", "write the sample vector into this CTF directory")
	serve := flag.String("serve", "", "serve an OCI registry holding the sample vector on this loopback address, e.g. 127.0.0.1:5000")
	flag.Parse()
	if *ctf == "" && *serve == "" {
		log.Fatal("nothing to do: pass -ctf DIR and/or -serve ADDR")
	}
	ctx := context.Background()
	if *ctf != "" {
		if err := publish(ctx, ocmtest.CTFRepository(*ctf)); err != nil {
			log.Fatalf("writing CTF: %v", err)
		}
		fmt.Printf("ctf::%s//acme.org/vectors/shop:1.0.0\n", *ctf)
	}
	if *serve != "" {
		if err := serveRegistry(ctx, *serve); err != nil {
			log.Fatal(err)
		}
	}
}

func publish(ctx context.Context, repo ocmtest.Repository) error {
	for _, cv := range sampleVector() {
		if _, err := ocmtest.Write(ctx, repo, cv); err != nil {
			return fmt.Errorf("%s:%s: %w", cv.Name, cv.Version, err)
		}
	}
	return nil
}

func serveRegistry(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}()
	host := l.Addr().String()
	if err := publish(ctx, ocmtest.RegistryRepository(auth.DefaultClient, host, "", true)); err != nil {
		return fmt.Errorf("pushing: %w", err)
	}
	fmt.Printf("http://%s//acme.org/vectors/shop:1.0.0\n", host)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	<-stop
	return srv.Close()
}
