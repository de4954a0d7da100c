package tree

import (
	"strings"
	"testing"

	"github.com/fluxdeployer/fluxdeployer/internal/inventory"
)

func TestWorkloadsAreSortedAndParsed(t *testing.T) {
	var refs []inventory.Ref
	for _, id := range []string{"apps_web__Service", "apps_web-config__ConfigMap", "apps_web_apps_Deployment", "broken"} {
		refs = append(refs, inventory.Parse(id))
	}
	got := workloads(refs)
	var names []string
	for _, n := range got {
		names = append(names, n.Kind+"/"+n.Namespace+"/"+n.Name)
	}
	want := "?//broken ConfigMap/apps/web-config Deployment/apps/web Service/apps/web"
	if strings.Join(names, " ") != want {
		t.Errorf("workloads: %v, want %s", names, want)
	}
}

func TestPrint(t *testing.T) {
	root := &Node{Kind: "VectorDeployment", Name: "shop", Ready: "False", Reason: "InstallFailed", Message: "1/2 artifacts ready", Children: []*Node{
		{Kind: "ArtifactDeployment", Name: "a", Ready: "True", Reason: "Succeeded", Message: "not shown when ready", Children: []*Node{
			{Kind: "HelmRepository", Name: "a"},
			{Kind: "HelmRelease", Name: "a", Ready: "True", Children: []*Node{
				{Kind: "Deployment", Name: "a", Replicas: "1/2 ready", Children: []*Node{
					{Kind: "Pod", Name: "a-1", Ready: "True"},
					{Kind: "Pod", Name: "a-2", Ready: "False", Reason: "ContainersNotReady", Message: "containers with unready status: [app]"},
				}},
				{Kind: "Service", Name: "a"},
			}},
		}},
		{Kind: "ArtifactDeployment", Name: "b", Ready: "Unknown"},
	}}
	var b strings.Builder
	if err := Print(&b, root); err != nil {
		t.Fatal(err)
	}
	want := `VectorDeployment/shop  Ready=False InstallFailed: 1/2 artifacts ready
├── ArtifactDeployment/a  Ready=True Succeeded
│   ├── HelmRepository/a
│   └── HelmRelease/a  Ready=True
│       ├── Deployment/a  1/2 ready
│       │   ├── Pod/a-1  Ready=True
│       │   └── Pod/a-2  Ready=False ContainersNotReady: containers with unready status: [app]
│       └── Service/a
└── ArtifactDeployment/b  Ready=Unknown
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestPrintMakesMessagesPrintable: a status message, which controllers copy from what tenants and registries
// wrote, reaches the terminal on one line and without control or format characters.
func TestPrintMakesMessagesPrintable(t *testing.T) {
	var b strings.Builder
	root := &Node{Kind: "VectorDeployment", Name: "shop", Ready: "False", Reason: "NotFound",
		Message: "registry says:\x1b[2J\x07 gone\r\nfake line\u202eevil"}
	if err := Print(&b, root); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "VectorDeployment/shop  Ready=False NotFound: registry says:[2J gone  fake lineevil\n"; got != want {
		t.Errorf("Print:\n%q\nwant\n%q", got, want)
	}
}
