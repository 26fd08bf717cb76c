package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image contract every AWARE image keeps, checked by the tests of the
// built images (make images-test).
const (
	// User is the numeric non-root user and group the components run as;
	// the manifests' securityContext names the same (runAsUser 65532).
	User = "65532:65532"
	// Prefix makes a binary's name its image's name: recommender is
	// aware-recommender, as the manifests in deploy/ name it.
	Prefix = "aware-"

	labelSource   = "org.opencontainers.image.source"
	labelRevision = "org.opencontainers.image.revision"
	labelVersion  = "org.opencontainers.image.version"
	labelCreated  = "org.opencontainers.image.created"
	labelTitle    = "org.opencontainers.image.title"
	labelLicenses = "org.opencontainers.image.licenses"
	// refName names an image inside an OCI layout (its index.json).
	refName = "org.opencontainers.image.ref.name"
)

// Spec is one image to assemble: a static binary on an empty (scratch)
// base.
type Spec struct {
	// Binary is the name of the program, e.g. recommender: the image is
	// Prefix+Binary and the program sits at /Binary.
	Binary string
	// Path is the static binary on disk.
	Path string
	// Version, Revision and Source fill the OCI labels.
	Version, Revision, Source string
	// Created is the time written into the config and the layer: the commit
	// time, so that one commit always gives one digest.
	Created time.Time
	// Arch is the GOARCH the binary was built for.
	Arch string
}

func (s Spec) validate() error {
	var errs []error
	if s.Binary == "" || strings.ContainsAny(s.Binary, "/:") {
		errs = append(errs, fmt.Errorf("binary name %q must be a plain program name", s.Binary))
	}
	for _, f := range []struct{ name, v string }{{"version", s.Version}, {"revision", s.Revision}, {"source", s.Source}, {"arch", s.Arch}} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", f.name))
		}
	}
	if s.Created.IsZero() {
		errs = append(errs, errors.New("creation time is zero"))
	}
	return errors.Join(errs...)
}

// Entrypoint is where the binary sits in the image.
func (s Spec) Entrypoint() string { return "/" + s.Binary }

// Build assembles the image of s: one layer with the binary (mode 0755,
// owned by root, so the non-root user can run but not change it) and a
// config with the entrypoint, the user and the labels. The result depends
// only on the binary and s: no time of the build enters it.
func Build(s Spec) (v1.Image, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("image of %q: %w", s.Binary, err)
	}
	bin, err := os.ReadFile(s.Path)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	// The layer is the tar stream of the one file, written with the
	// standard library's archive/tar; go-containerregistry compresses and
	// digests it.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(s.Entrypoint(), "/"),
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  s.Created.UTC(),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image of %s: layer: %w", s.Binary, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: s.Created.UTC()}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "make images: " + s.Entrypoint(),
			Comment:   "static " + s.Binary + " binary",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	cf = cf.DeepCopy()
	labels := s.Labels()
	cf.Created = created
	cf.OS = "linux"
	cf.Architecture = s.Arch
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{s.Entrypoint()},
		User:       User,
		WorkingDir: "/",
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Binary, err)
	}
	// The manifest carries the same metadata as annotations, which
	// registries show without fetching the config.
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// Labels are the OCI labels of the image of s.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		labelSource:   s.Source,
		labelRevision: s.Revision,
		labelVersion:  s.Version,
		labelCreated:  s.Created.UTC().Format(time.RFC3339),
		labelTitle:    Prefix + s.Binary,
		labelLicenses: "Apache-2.0",
	}
}

// WriteLayout writes img as the OCI image layout dir (replacing whatever
// was there), its one manifest named tag in index.json.
func WriteLayout(dir string, img v1.Image, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: tag})); err != nil {
		return fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the one image of the OCI layout dir and its tag.
func ReadLayout(dir string) (v1.Image, string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	if len(im.Manifests) != 1 {
		return nil, "", fmt.Errorf("OCI layout %s holds %d manifests, want 1 (run make images)", dir, len(im.Manifests))
	}
	d := im.Manifests[0]
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, "", fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	return img, d.Annotations[refName], nil
}

// run is the command line: `images build ...` or `images push ...`.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: images build|push [flags] BINARY [BINARY]")
	}
	switch args[0] {
	case "build":
		return runBuild(args[1:], out)
	case "push":
		return runPush(ctx, args[1:], out)
	default:
		return fmt.Errorf("unknown subcommand %q: want build or push", args[0])
	}
}

func runBuild(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	binDir := fs.String("binaries", "", "directory holding the static binaries, one per BINARY argument")
	outDir := fs.String("out", "", "directory to write one OCI layout per image into (OUT/aware-BINARY)")
	tag := fs.String("tag", "", "tag the images get in their layout, e.g. the version")
	version := fs.String("version", "", "value of the org.opencontainers.image.version label")
	revision := fs.String("revision", "", "value of the org.opencontainers.image.revision label (the commit)")
	source := fs.String("source", "", "value of the org.opencontainers.image.source label (the repository URL)")
	epoch := fs.String("epoch", "", "creation time in seconds since 1970 (SOURCE_DATE_EPOCH; make images uses the commit time)")
	arch := fs.String("arch", "", "GOARCH of the binaries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *binDir == "" || *outDir == "" || *tag == "" {
		return errors.New("build needs --binaries, --out and --tag")
	}
	if fs.NArg() == 0 {
		return errors.New("build needs at least one BINARY argument")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || secs < 0 {
		return fmt.Errorf("--epoch %q is not a count of seconds since 1970", *epoch)
	}
	for _, b := range fs.Args() {
		s := Spec{Binary: b, Path: filepath.Join(*binDir, b), Version: *version, Revision: *revision,
			Source: *source, Created: time.Unix(secs, 0), Arch: *arch}
		img, err := Build(s)
		if err != nil {
			return err
		}
		dir := filepath.Join(*outDir, Prefix+b)
		if err := WriteLayout(dir, img, *tag); err != nil {
			return err
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		size, err := imageSize(img)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s:%s %s %.1f MB compressed -> %s\n", Prefix+b, *tag, d, float64(size)/1e6, dir)
	}
	return nil
}

// imageSize is the bytes a registry stores for img: manifest, config and
// compressed layers.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

func runPush(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory holding the OCI layouts that build wrote")
	registry := fs.String("registry", "", "registry and path to push to, e.g. ghcr.io/example (REGISTRY)")
	tag := fs.String("tag", "", "tag to push; empty keeps the tag of each layout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *registry == "" {
		return errors.New("push needs --dir and --registry (make push REGISTRY=example.com/aware)")
	}
	if fs.NArg() == 0 {
		return errors.New("push needs at least one BINARY argument")
	}
	for _, b := range fs.Args() {
		img, layoutTag, err := ReadLayout(filepath.Join(*dir, Prefix+b))
		if err != nil {
			return err
		}
		t := *tag
		if t == "" {
			t = layoutTag
		}
		ref, err := name.NewTag(strings.TrimSuffix(*registry, "/") + "/" + Prefix + b + ":" + t)
		if err != nil {
			return fmt.Errorf("image reference for %s: %w", b, err)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pushed %s@%s\n", ref, d)
	}
	return nil
}
