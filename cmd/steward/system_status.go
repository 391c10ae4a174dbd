package main

import (
	"context"

	"github.com/agentstack/agentstack/steward/host"
)

// extend adds the background plane to a System page snapshot.
func (bg *background) extend(ctx context.Context, info *host.SystemInfo) {
	if bg == nil {
		return
	}
	if bg.watcher != nil {
		info.Services = append(info.Services, bg.watcher.status())
	}
}
