package ocm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/spec"
)

// ctfStore reads one component's repository in a CTF directory. Archives (.tar, .tgz) are not supported:
// fluxdeployer uses CTFs for air-gapped copies, tests and demos, where a directory is as easy to ship.
type ctfStore struct {
	dir        string
	repository string
}

func newCTFStore(r Ref) (*ctfStore, error) {
	dir := strings.TrimPrefix(r.FilePath, "file://")
	for _, ext := range []string{".tar", ".tgz", ".tar.gz"} {
		if strings.HasSuffix(dir, ext) {
			return nil, newError(ReasonReferenceInvalid, r.Describe(), "CTF archives are not supported, extract %s into a directory", dir)
		}
	}
	return &ctfStore{dir: dir, repository: spec.RepositoryPath("", r.Component)}, nil
}

// FetchReference looks a tag or digest up in artifact-index.json, as OCM's CTF store resolves it.
func (s *ctfStore) FetchReference(ctx context.Context, reference string) (ocispec.Descriptor, io.ReadCloser, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, spec.CTFIndexFile))
	if err != nil {
		return ocispec.Descriptor{}, nil, notFoundIfMissing(err)
	}
	idx, err := spec.DecodeCTFIndex(data)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	for _, a := range idx.Artifacts {
		if a.Repository != s.repository || (a.Tag != reference && a.Digest != reference) {
			continue
		}
		desc := ocispec.Descriptor{MediaType: a.MediaType, Digest: digest.Digest(a.Digest), Size: -1}
		if desc.MediaType == "" { // written by old OCM
			desc.MediaType = ocispec.MediaTypeImageManifest
		}
		f, err := s.Fetch(ctx, desc)
		return desc, f, err
	}
	return ocispec.Descriptor{}, nil, fmt.Errorf("%s:%s in CTF %s: %w", s.repository, reference, s.dir, errdef.ErrNotFound)
}

func (s *ctfStore) Fetch(_ context.Context, target ocispec.Descriptor) (io.ReadCloser, error) {
	// Validating first keeps a hostile index from naming files outside blobs/.
	if err := target.Digest.Validate(); err != nil {
		return nil, newError(ReasonDigestMismatch, s.dir, "invalid digest %q: %v", target.Digest, err)
	}
	f, err := os.Open(filepath.Join(s.dir, spec.CTFBlobsDir, spec.CTFBlobName(target.Digest.String())))
	if err != nil {
		return nil, notFoundIfMissing(err)
	}
	return f, nil
}

func notFoundIfMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", errdef.ErrNotFound, err)
	}
	return err
}
