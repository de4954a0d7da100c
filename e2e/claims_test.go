package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
)

// squattingBundle has a Service frontend: with the suffix -1-0-0-<hash> of a kustomize artifact
// acme.org/artifacts/frontend 1.0.0 it is named like the Helm release of that component and version, and so like
// the Service the release's chart names after it.
var squattingBundle = map[string]string{
	"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - service.yaml\n",
	"service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: frontend
spec:
  selector:
    app: squatter
  ports:
    - name: http
      port: 9999
      protocol: TCP
`,
}

// TestSharedTargetNamespaceClaimsAcrossKinds: two namespaces deploy into one configured targetNamespace. The first
// deploys a reusable chart, acme.org/artifacts/frontend 1.0.0; the second, later, a kustomize artifact of the same
// component and version from another repository, whose bundle renders a Service named like the release's. The
// second gets TargetNameConflict, without learning which namespace holds the name, and no Kustomization, so the
// real kustomize-controller never touches the release's Service.
func TestSharedTargetNamespaceClaimsAcrossKinds(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	chart := helmArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", true, ocmtest.WebChart("frontend", "1.0.0"))
	reg.Push(t, "", chart, ocmtest.Vector("acme.org/vectors/shop", "1.0.0", chart))
	bundle := kustomizeArtifact(t, reg, "acme.org/artifacts/frontend", "1.0.0", squattingBundle)
	reg.Push(t, "other", bundle, ocmtest.Vector("acme.org/vectors/squat", "1.0.0", bundle))

	target := newNamespace(t, "shared")
	holder := newNamespace(t, "holder")
	squatter := newNamespace(t, "squatter")
	startFluxdeployer(t, map[string]string{"targetNamespace": target})
	waitReady(t, 3*time.Minute, createVectorDeployment(t, holder, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0")))
	release := adName(t, chart, nil)
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: target, Name: release}, svc); err != nil {
		t.Fatalf("the release's Service: %v", err)
	}

	createVectorDeployment(t, squatter, "squat", reg.Ref("other", "acme.org/vectors/squat", "1.0.0"))
	ad := &konfidencev1.ArtifactDeployment{}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: squatter, Name: release}, ad); err != nil {
			return err
		}
		if c := conditions.Get(ad, konfidencev1.ReadyCondition); c == nil || c.Reason != konfidencev1.TargetNameConflictReason {
			return fmt.Errorf("the kustomize ArtifactDeployment's Ready: %+v, want %s", c, konfidencev1.TargetNameConflictReason)
		}
		return nil
	})
	if msg := conditions.GetMessage(ad, konfidencev1.ReadyCondition); strings.Contains(msg, holder) {
		t.Errorf("TargetNameConflict names the holder's namespace: %q", msg)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ad), &kustomizev1.Kustomization{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Kustomization was applied over the release's names: %v", err)
	}
	after := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(svc), after); err != nil {
		t.Fatal(err)
	}
	if after.UID != svc.UID || after.Spec.Ports[0].Port != 80 || after.Spec.Selector["app"] == "squatter" {
		t.Errorf("the release's Service was changed: ports %+v, selector %v", after.Spec.Ports, after.Spec.Selector)
	}
}
