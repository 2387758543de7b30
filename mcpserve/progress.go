package mcpserve

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/host"
)

// progressReporter sends a call's progress as notifications/progress on
// the token its client gave: the seconds so far as the progress (it only
// grows, as the protocol asks; the total is unknown), and a message with
// the last line the call printed. A notification that cannot be sent is
// dropped: the call goes on.
func progressReporter(ctx context.Context, ss *mcp.ServerSession, token any) func(host.Progress) {
	return func(p host.Progress) {
		msg := fmt.Sprintf("running for %s", p.Elapsed.Round(time.Second))
		if p.Line != "" {
			msg += ": " + p.Line
		}
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      p.Elapsed.Seconds(),
			Message:       msg,
		})
	}
}
