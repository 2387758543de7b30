package hosts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The configuration of each host: where its model is, the dsh-actors
// server (started by the host over stdio, or at r.url with a bearer token),
// and whatever keeps it from reaching anything but 127.0.0.1.

const serverName = "dsh-actors"

func writeJSON(r *run, path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) bearer() map[string]string {
	return map[string]string{"Authorization": "Bearer " + r.token}
}

// Claude Code: --mcp-config with only this server, its tools allowed
// without asking; the Anthropic API at ANTHROPIC_BASE_URL.
func startClaude(r *run) ([]string, []string) {
	var server map[string]any
	if r.transport == "stdio" {
		server = map[string]any{"type": "stdio", "command": r.e.bin, "args": r.serverArgs, "env": r.serverEnv}
	} else {
		server = map[string]any{"type": "http", "url": r.url, "headers": r.bearer()}
	}
	config := filepath.Join(r.work, "..", "mcp.json")
	writeJSON(r, config, map[string]any{"mcpServers": map[string]any{serverName: server}})
	args := []string{"-p", r.prompt, "--mcp-config", config, "--strict-mcp-config",
		"--allowedTools", "mcp__" + serverName, "--output-format", "stream-json", "--verbose"}
	return args, r.hostEnv(
		"ANTHROPIC_BASE_URL="+r.model.url,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-a-local-model",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
	)
}

// tomlString quotes s for TOML (a basic string: JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func tomlInlineTable(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = tomlString(k) + " = " + tomlString(m[k])
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// Codex: a fresh CODEX_HOME whose config.toml names a provider at the
// model server (the Responses API), and the server with a short
// tool_timeout_sec.
func startCodex(r *run) ([]string, []string) {
	codexHome := filepath.Join(r.home, ".codex")
	const tokenVar = "DSH_ACTORS_TEST_TOKEN"
	var b strings.Builder
	fmt.Fprintf(&b, `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[history]
persistence = "none"

[model_providers.fake]
name = "fake"
base_url = %s
env_key = "FAKE_MODEL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[mcp_servers.%s]
`, tomlString(r.model.url+"/v1"), tomlString(serverName))
	if r.transport == "stdio" {
		args := make([]string, len(r.serverArgs))
		for i, a := range r.serverArgs {
			args[i] = tomlString(a)
		}
		fmt.Fprintf(&b, "command = %s\nargs = [%s]\nenv = %s\n", tomlString(r.e.bin), strings.Join(args, ", "), tomlInlineTable(r.serverEnv))
	} else {
		fmt.Fprintf(&b, "url = %s\nbearer_token_env_var = %s\n", tomlString(r.url), tomlString(tokenVar))
	}
	fmt.Fprintf(&b, "startup_timeout_sec = 60\ntool_timeout_sec = %s\n", strconv.FormatFloat(hostTimeout.Seconds(), 'f', -1, 64))
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(b.String()), 0o600); err != nil {
		r.t.Fatal(err)
	}
	args := []string{"exec", "--skip-git-repo-check", "--json", r.prompt}
	environ := r.hostEnv("CODEX_HOME="+codexHome, "FAKE_MODEL_API_KEY=fake-key-for-a-local-model")
	if r.transport == "http" {
		environ = append(environ, tokenVar+"="+r.token)
	}
	return args, environ
}

// Gemini CLI: ~/.gemini/settings.json with API-key auth, telemetry and
// updates off, and the server trusted (its calls run without asking); the
// Gemini API at GOOGLE_GEMINI_BASE_URL.
func startGemini(r *run) ([]string, []string) {
	var server map[string]any
	if r.transport == "stdio" {
		server = map[string]any{"command": r.e.bin, "args": r.serverArgs, "env": r.serverEnv, "trust": true}
	} else {
		server = map[string]any{"httpUrl": r.url, "headers": r.bearer(), "trust": true}
	}
	writeJSON(r, filepath.Join(r.home, ".gemini", "settings.json"), map[string]any{
		"security":   map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":    map[string]any{"usageStatisticsEnabled": false},
		"telemetry":  map[string]any{"enabled": false},
		"general":    map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
		"mcpServers": map[string]any{serverName: server},
	})
	args := []string{"-m", "gemini-2.5-pro", "--approval-mode", "yolo", "--output-format", "stream-json", "-p", r.prompt}
	return args, r.hostEnv(
		"GEMINI_API_KEY=fake-key-for-a-local-model",
		"GOOGLE_GEMINI_BASE_URL="+r.model.url,
		"GEMINI_CLI_TRUST_WORKSPACE=true",
	)
}

// opencode: opencode.json with an OpenAI-compatible provider at the model
// server (Chat Completions), and the server with a short per-server
// timeout.
func startOpencode(r *run) ([]string, []string) {
	var server map[string]any
	if r.transport == "stdio" {
		server = map[string]any{"type": "local", "command": append([]string{r.e.bin}, r.serverArgs...), "environment": r.serverEnv}
	} else {
		server = map[string]any{"type": "remote", "url": r.url, "headers": r.bearer(), "oauth": false}
	}
	server["timeout"] = hostTimeout.Milliseconds()
	config := filepath.Join(r.work, "opencode.json")
	writeJSON(r, config, map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		"provider": map[string]any{
			"fake": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "fake",
				"options": map[string]any{"baseURL": r.model.url + "/v1", "apiKey": "fake-key-for-a-local-model"},
				"models":  map[string]any{"fake-model": map[string]any{"name": "fake-model", "tool_call": true}},
			},
		},
		"permission": map[string]any{"*": "allow"},
		"mcp":        map[string]any{serverName: server},
	})
	args := []string{"run", "-m", "fake/fake-model", "--format", "json", r.prompt}
	return args, r.hostEnv(
		"OPENCODE_DISABLE_MODELS_FETCH=true",
		"OPENCODE_DISABLE_AUTOUPDATE=true",
		"OPENCODE_DISABLE_SHARE=true",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=true",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=true",
		// At start-up opencode installs @opencode-ai/plugin into its config
		// directory with the npm it embeds, in the background: its registry
		// is the model server, which refuses.
		"npm_config_registry="+r.model.url+"/npm-registry/",
	)
}
