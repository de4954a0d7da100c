package main

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

// preview publishes the sample vector into a CTF directory and/or a registry served on addr until ctx ends, and
// prints the references; fluxdeployer name / vector inspect read them (make preview).
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
	if err := publish(ctx, ocmtest.RegistryRepository(auth.DefaultClient, reg.Host, "", true), reg.Host); err != nil {
		return fmt.Errorf("pushing: %w", err)
	}
	fmt.Println(reg.Ref("", vectorName, vectorVersion))
	<-ctx.Done()
	return nil
}
