package main

import (
	"context"
	"fmt"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
)

const (
	helmType      = "cloud.konfidence.flux.helm"
	kustomizeType = "cloud.konfidence.flux.kustomize"
	vectorName    = "acme.org/vectors/shop"
	vectorVersion = "1.0.0"

	frontendVersion = "1.2.3+build.5"
	databaseVersion = "16.4.0"
)

// sampleVector is the shop vector: a reusable web chart, a reusable Kustomize bundle and a database chart that
// disables reuse (one release per VectorDeployment). Its resources point at charts and a bundle in the registry
// at host (see pushDeployables).
func sampleVector(host string) []ocmtest.ComponentVersion {
	frontend := ocmtest.Artifact("acme.org/artifacts/frontend", frontendVersion, helmType, true)
	frontend.Resources[1] = ocmtest.ChartResource(frontendVersion, fmt.Sprintf("http://%s/charts/frontend:1.2.3_build.5", host))
	config := ocmtest.Artifact("acme.org/artifacts/config", "0.4.0", kustomizeType, true)
	config.Resources[1] = ocmtest.BundleResource("0.4.0", fmt.Sprintf("http://%s/bundles/config:0.4.0", host))
	database := ocmtest.Artifact("acme.org/artifacts/database", databaseVersion, helmType, false)
	database.Resources[1] = ocmtest.ChartResource(databaseVersion, fmt.Sprintf("http://%s/charts/database:16.4.0", host))
	return []ocmtest.ComponentVersion{frontend, config, database, ocmtest.Vector(vectorName, vectorVersion, frontend, config, database)}
}

// pushDeployables pushes what the sample vector's resources name: the frontend and database charts (of
// frontendVersion and databaseVersion) and the config bundle.
func pushDeployables(ctx context.Context, host string, frontend, database ocmtest.Chart, bundle map[string]string) error {
	for _, chart := range []ocmtest.Chart{frontend, database} {
		if _, err := ocmtest.PushHelmChart(ctx, host, "charts", chart); err != nil {
			return fmt.Errorf("chart %s: %w", chart.Name, err)
		}
	}
	if _, err := ocmtest.PushKustomizeBundle(ctx, host, "bundles/config", "0.4.0", bundle); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

func publish(ctx context.Context, repo ocmtest.Repository, host string) error {
	for _, cv := range sampleVector(host) {
		if _, err := ocmtest.Write(ctx, repo, cv); err != nil {
			return fmt.Errorf("%s:%s: %w", cv.Name, cv.Version, err)
		}
	}
	return nil
}
