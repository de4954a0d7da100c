package main

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// preview publishes the sample vector into a CTF directory and/or a registry served on addr (with the charts and
// the bundle it names) until ctx ends, and prints the references; fluxdeployer name / vector inspect read them (make preview).
func preview(ctx context.Context, ctf, addr string) error {
	if ctf != "" {
		if err := publish(ctx, ocmtest.CTFRepository(ctf), "registry.example"); err != nil {
			return fmt.Errorf("writing CTF: %w", err)
		}
		fmt.Printf("ctf::%s//%s:%s\n", ctf, vectorName, vectorVersion)
	}
	if addr == "" {
		return nil
	}
	reg, err := ocmtest.ListenRegistry(addr)
	if err != nil {
		return err
	}
	defer reg.Close()
	// The charts and the bundle its resources name are served beside the vector, so that the vector deploys from
	// here: config/samples names this registry at 127.0.0.1:5000.
	err = pushDeployables(ctx, reg.Host, ocmtest.WebChart("frontend", frontendVersion), ocmtest.WebChart("database", databaseVersion), ocmtest.ConfigBundle)
	if err == nil {
		err = publish(ctx, ocmtest.RegistryRepository(auth.DefaultClient, reg.Host, "", true), reg.Host)
	}
	if err != nil {
		return fmt.Errorf("pushing: %w", err)
	}
	fmt.Println(reg.Ref("", vectorName, vectorVersion))
	<-ctx.Done()
	return nil
}
