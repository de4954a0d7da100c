package vectordeployment

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/ocmtest"
	"github.com/fluxdeployer/fluxdeployer/internal/testenv"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// TestHostileDescriptorsAreRefused: a vector whose descriptor exceeds the size limit, and one whose descriptor is
// not JSON although its media type says so, are refused with a specific reason and a Warning event before they
// cost the operator more than the limit.
func TestHostileDescriptorsAreRefused(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	const vector = "acme.org/vectors/shop"
	head := `{"meta":{"schemaVersion":"v2"},"component":{"name":"` + vector + `","version":"1.0.0","provider":"p","resources":[`
	oversized := ocmtest.ComponentVersion{Name: vector, Version: "1.0.0",
		RawDescriptor: []byte(head + strings.Repeat(`{},`, ocm.DefaultMaxDescriptorSize/3) + `{}]}}`)}
	notJSON := ocmtest.ComponentVersion{Name: vector, Version: "1.0.0",
		RawDescriptor: []byte("meta:\n  schemaVersion: v2\ncomponent:\n  name: " + vector + "\n  version: 1.0.0\n")}
	reg.Push(t, "oversized", oversized)
	reg.Push(t, "not-json", notJSON)
	startManager(t, managerOptions{})

	for _, tc := range []struct {
		subPath   string
		reason    ocm.Reason
		permanent bool
	}{
		{"oversized", ocm.ReasonBlobTooLarge, false},
		{"not-json", ocm.ReasonDescriptorInvalid, true},
	} {
		t.Run(tc.subPath, func(t *testing.T) {
			ns := newNamespace(t)
			vd := createVectorDeployment(t, ns, "shop", reg.Ref(tc.subPath, vector, "1.0.0"))
			vd = waitForCondition(t, vd, konfidencev1.VectorDownloadedCondition, metav1.ConditionFalse, string(tc.reason))
			if conditions.IsReady(vd) || conditions.IsStalled(vd) != tc.permanent {
				t.Errorf("conditions %+v", vd.Status.Conditions)
			}
			waitForEvent(t, ns, vd.Name, string(tc.reason))
			if ads := listADs(t, ns); len(ads) != 0 {
				t.Errorf("created %v", keys(ads))
			}
		})
	}
}

// TestRegistryAllowList: with --allowed-registries, a VectorDeployment naming another registry is Stalled with
// RegistryNotAllowed and an event, and that registry is never asked.
func TestRegistryAllowList(t *testing.T) {
	allowed, other := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	pushVector(t, allowed, "acme.org/vectors/shop", app)
	otherVector := pushVector(t, other, "acme.org/vectors/shop", app)
	published := other.Requests()
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{AllowedHosts: []string{allowed.Host}})})

	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "shop", otherVector)
	vd = waitForCondition(t, vd, konfidencev1.StalledCondition, metav1.ConditionTrue, string(ocm.ReasonRegistryNotAllowed))
	waitForEvent(t, ns, vd.Name, string(ocm.ReasonRegistryNotAllowed), other.Host)
	if n := other.Requests() - published; n != 0 {
		t.Errorf("the registry not allowed received %d requests", n)
	}
}

// TestArtifactHostAllowList: with --allowed-registries, a vector from an allowed registry one of whose artifacts has
// its chart on a host not allowed (here the cloud metadata address) is Stalled with RegistryNotAllowed and a
// Warning event naming the artifact and the host, and no ArtifactDeployment is created, not even for its other,
// allowed artifact: nothing would have source-controller pull from that host. Before, both were created.
func TestArtifactHostAllowList(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	good := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true) // its chart is on ghcr.io
	metadata := ocmtest.Artifact("acme.org/artifacts/backend", "1.0.0", helmType, true)
	metadata.Resources[1] = ocmtest.ChartResource("1.0.0", "169.254.169.254/charts/backend:1.0.0")
	vector := pushVector(t, reg, "acme.org/vectors/shop", good, metadata)
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{AllowedHosts: []string{reg.Host, "ghcr.io"}})})

	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "shop", vector)
	vd = waitForCondition(t, vd, konfidencev1.StalledCondition, metav1.ConditionTrue, string(ocm.ReasonRegistryNotAllowed))
	if conditions.GetReason(vd, konfidencev1.ReadyCondition) != string(ocm.ReasonRegistryNotAllowed) {
		t.Errorf("Ready: %+v", conditions.Get(vd, konfidencev1.ReadyCondition))
	}
	waitForEvent(t, ns, vd.Name, string(ocm.ReasonRegistryNotAllowed), "acme.org/artifacts/backend:1.0.0", "169.254.169.254")
	if ads := listADs(t, ns); len(ads) != 0 {
		t.Errorf("created %v", keys(ads))
	}
}

// TestHangingRegistryDoesNotStarveOthers: VectorDeployments of a registry that accepts requests and never answers
// occupy at most --registry-host-concurrency of the reconciler's workers; a vector of another registry still
// resolves, and the VectorDeployments waiting for the hanging one say RegistryBusy. Without
// the limit, the hanging reads held both workers for the client's timeout of a minute.
func TestHangingRegistryDoesNotStarveOthers(t *testing.T) {
	hanging, healthy := ocmtest.NewRegistry(t), ocmtest.NewRegistry(t)
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	hangingVector := pushVector(t, hanging, "acme.org/vectors/shop", app)
	healthyVector := pushVector(t, healthy, "acme.org/vectors/shop", app)
	hanging.SetHanging(true)
	published := hanging.Requests()
	// Two workers (startManager's), one of them for the hanging registry.
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{HostConcurrency: 1, HostWait: time.Second})})

	ns := newNamespace(t)
	var stuck []*konfidencev1.VectorDeployment
	for _, name := range []string{"hang-a", "hang-b", "hang-c"} {
		stuck = append(stuck, createVectorDeployment(t, ns, name, hangingVector))
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if hanging.Requests() == published {
			return errors.New("no read of the hanging registry yet")
		}
		return nil
	})
	vd := createVectorDeployment(t, ns, "healthy", healthyVector)
	waitForCondition(t, vd, konfidencev1.ArtifactDeploymentsCreatedCondition, metav1.ConditionTrue, "Succeeded")

	testenv.Eventually(t, 30*time.Second, func() error {
		for _, s := range stuck {
			if conditions.GetReason(getVD(t, s), konfidencev1.ReadyCondition) == string(ocm.ReasonRegistryBusy) &&
				len(eventMessages(t, ns, s.Name, string(ocm.ReasonRegistryBusy))) > 0 {
				return nil
			}
		}
		return errors.New("no VectorDeployment of the hanging registry says RegistryBusy, with an event")
	})
}

// TestHostileRegistryTextIsSanitized: a registry that answers every request with 6 KiB of error text full of
// terminal escapes (OSC 52, screen clears, cursor moves), BEL, CR, a C1 CSI and right-to-left overrides gets into
// the VectorDeployment's conditions and its events bounded, printable text: at most sanitize.MaxTextLength bytes,
// none of those characters, the registry's words kept. Before, each condition and the event repeated all of it.
func TestHostileRegistryTextIsSanitized(t *testing.T) {
	reg := ocmtest.NewRegistry(t)
	hostile := ocmtest.HostileText(6 << 10)
	reg.SetRefusing(hostile)
	startManager(t, managerOptions{})

	ns := newNamespace(t)
	vd := createVectorDeployment(t, ns, "shop", reg.Ref("", "acme.org/vectors/shop", "1.0.0"))
	reason := string(ocm.ReasonUnauthorized)
	vd = waitForCondition(t, vd, meta.ReadyCondition, metav1.ConditionFalse, reason)
	texts := map[string]string{"event": waitForEvent(t, ns, vd.Name, reason, "registry says no")}
	for _, c := range vd.Status.Conditions {
		texts["condition "+c.Type] = c.Message
	}
	for what, text := range texts {
		if len(text) > sanitize.MaxTextLength || !strings.Contains(text, "registry says no") {
			t.Errorf("%s has %d bytes (want at most %d, with the registry's words): %q", what, len(text), sanitize.MaxTextLength, text)
		}
		if i := strings.IndexFunc(text, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
			t.Errorf("%s holds the non-printable %q at byte %d: %q", what, []rune(text[i:])[0], i, text)
		}
	}
}

// TestHangingRegistriesOfOneNamespaceDoNotStarveAnother: a tenant's VectorDeployments name registries that accept
// requests and never answer, each under a host of its own, as one registry named under several ports or names is:
// the bound per host holds none of them back. The bound per namespace does: they hold at most
// --registry-namespace-concurrency (here 1) of the reconciler's two workers, another namespace's vector gets its
// ArtifactDeployments promptly, and the tenant's VectorDeployments over the bound say NamespaceBusy, with an event,
// and wait in the work queue rather than in a worker. Without it, the hanging reads held both workers until the
// registry transport gave up on them (30 s), and the other namespace's vector waited as long.
func TestHangingRegistriesOfOneNamespaceDoNotStarveAnother(t *testing.T) {
	app := ocmtest.Artifact("acme.org/artifacts/frontend", "1.0.0", helmType, true)
	healthyVector := pushVector(t, ocmtest.NewRegistry(t), "acme.org/vectors/shop", app)
	var hanging []*ocmtest.Registry
	var hangingVectors []string
	for range 3 {
		reg := ocmtest.NewRegistry(t)
		hangingVectors = append(hangingVectors, pushVector(t, reg, "acme.org/vectors/shop", app))
		reg.SetHanging(true)
		hanging = append(hanging, reg)
	}
	published := make([]int64, len(hanging))
	for i, reg := range hanging {
		published[i] = reg.Requests()
	}
	startManager(t, managerOptions{resolver: ocm.NewClient(ocm.Options{NamespaceConcurrency: 1, NamespaceWait: 500 * time.Millisecond})})

	tenant := newNamespace(t)
	var stuck []*konfidencev1.VectorDeployment
	for i, vector := range hangingVectors {
		stuck = append(stuck, createVectorDeployment(t, tenant, fmt.Sprintf("hang-%d", i), vector))
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		for i, reg := range hanging {
			if reg.Requests() > published[i] {
				return nil
			}
		}
		return errors.New("no read of a hanging registry yet")
	})

	other := newNamespace(t)
	created := time.Now()
	vd := createVectorDeployment(t, other, "healthy", healthyVector)
	testenv.Eventually(t, 15*time.Second, func() error {
		if c := conditions.Get(getVD(t, vd), konfidencev1.ArtifactDeploymentsCreatedCondition); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("the other namespace's vector, %s after its creation: ArtifactDeploymentsCreated %+v", time.Since(created).Round(time.Second), c)
		}
		return nil
	})
	t.Logf("the other namespace's ArtifactDeployments were created %s after its VectorDeployment", time.Since(created).Round(100*time.Millisecond))

	testenv.Eventually(t, 30*time.Second, func() error {
		for _, s := range stuck {
			if conditions.GetReason(getVD(t, s), konfidencev1.ReadyCondition) == string(ocm.ReasonNamespaceBusy) &&
				len(eventMessages(t, tenant, s.Name, string(ocm.ReasonNamespaceBusy))) > 0 {
				return nil
			}
		}
		return errors.New("no VectorDeployment of the tenant says NamespaceBusy, with an event")
	})
}
