package ocm

import (
	"context"
	"strings"

	"oras.land/oras-go/v2/registry/remote"
)

// MaxListedVersions bounds the versions Versions collects from one repository: a registry decides how many tags it
// lists, and each one costs memory and, when verification applies, a read.
const MaxListedVersions = 10000

// Versions lists the versions of ref's component in its OCI registry: the tags of the component's repository that
// are versions, each read back as OCM writes a version into a tag ("+" becomes ".build-"); aliases such as
// "latest" are left out. ref names the component, with or without a version. The reads pass the same allow-list,
// credentials, namespace and host limits and timeout as ResolveVector's.
func (c *Client) Versions(ctx context.Context, ref string, read Read) ([]string, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.IsCTF() {
		return nil, newError(ReasonReferenceInvalid, r.Describe(), "versions are listed from OCI registries only")
	}
	if err := c.allowed(r); err != nil {
		return nil, err
	}
	a, err := c.access(ctx, r, read.Credentials)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	release, err := c.slots(ctx, read, r.Host(), r.Describe())
	if err != nil {
		return nil, err
	}
	defer release()
	s, err := c.store(r, a)
	if err != nil {
		return nil, err
	}
	var versions []string
	err = s.(*remote.Repository).Tags(ctx, "", func(tags []string) error {
		for _, tag := range tags {
			if v := tagVersion(tag); isVersion(v) {
				versions = append(versions, v)
			}
		}
		if len(versions) > MaxListedVersions {
			return newError(ReasonTooManyReferences, r.Describe(), "the repository lists more than %d versions", MaxListedVersions)
		}
		return nil
	})
	if err != nil {
		return nil, a.explain(classify(r.Describe(), err))
	}
	return versions, nil
}

// tagVersion undoes the one replacement by which OCM writes a version as an OCI tag (see spec.VersionTag). The
// descriptor read under the tag must still name that version, so a tag that only looks like one is refused when
// read (DescriptorMismatch).
func tagVersion(tag string) string {
	return strings.Replace(tag, ".build-", "+", 1)
}
