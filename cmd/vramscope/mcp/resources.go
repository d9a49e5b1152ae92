package mcp

import (
	"context"
	"encoding/json"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/daemon/client"
)

// Resource URIs: the daemon's stored snapshots, one snapshot's record and
// one snapshot's report (the summary analyze_snapshot gives).
const (
	snapshotsURI   = "vramscope://snapshots"
	snapshotPrefix = "vramscope://snapshots/"
	reportPrefix   = "vramscope://reports/"
)

func addResources(s *sdk.Server, b *backend) {
	s.AddResource(&sdk.Resource{URI: snapshotsURI, Name: "snapshots", MIMEType: "text/plain",
		Description: "The snapshots the vramscope daemon stored, newest first (needs the daemon)."},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			text, err := b.snapshots(ctx, snapshotsIn{Limit: 50})
			if err != nil {
				return nil, err
			}
			return textResource(req.Params.URI, "text/plain", text), nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: snapshotPrefix + "{id}", Name: "snapshot", MIMEType: "application/json",
		Description: "One stored snapshot's record: where it came from, when, its size and file."},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, snapshotPrefix)
			var res api.SnapshotResult
			if err := b.call(ctx, api.SnapshotGet, api.IDParams{ID: id}, &res); err != nil {
				return nil, notFound(req.Params.URI, err)
			}
			j, err := json.MarshalIndent(res, "", "  ")
			if err != nil {
				return nil, err
			}
			return textResource(req.Params.URI, "application/json", string(j)), nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: reportPrefix + "{id}", Name: "report", MIMEType: "text/plain",
		Description: "One stored snapshot's report: the out-of-memory error, findings, top lines and named tensors."},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, reportPrefix)
			if isFile(id) {
				return nil, sdk.ResourceNotFoundError(req.Params.URI) // reports are of stored snapshots; files go through analyze_snapshot
			}
			res, err := b.analysis(ctx, id)
			if err != nil {
				return nil, notFound(req.Params.URI, err)
			}
			text, err := answer(res, "summary", 10)
			if err != nil {
				return nil, err
			}
			return textResource(req.Params.URI, "text/plain", text), nil
		})
}

func textResource(uri, mime, text string) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}
}

// notFound answers the protocol's resource-not-found error when the daemon
// knows no such snapshot; other failures (no daemon) keep their words.
func notFound(uri string, err error) error {
	if client.Code(err) == api.CodeNotFound {
		return sdk.ResourceNotFoundError(uri)
	}
	return err
}
