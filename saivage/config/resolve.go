package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Environment variables read by ResolveInputs and ResolveServer.
const (
	EnvRoot   = "SAIVAGE_ROOT"
	EnvConfig = "SAIVAGE_CONFIG"
	EnvHost   = "SAIVAGE_HOST"
	EnvPort   = "SAIVAGE_PORT"
)

// Defaults for the operator listener.
const (
	DefaultHost = "127.0.0.1"
	DefaultPort = 4400
)

// StateDir is the project's generated and configuration directory.
const StateDir = ".saivage"

// Source says where a selected value came from.
type Source string

// Sources of a selected value, in precedence order.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "env"
	FromYAML    Source = "yaml"
	FromDefault Source = "default"
	FromCwd     Source = "cwd"
)

// Flags are the command-line values that take precedence over the
// environment. Empty or zero means "not given".
type Flags struct {
	Root, Config, Host string
	Port               int
}

// Inputs are the selected project root and configuration path.
type Inputs struct {
	Root         string
	RootSource   Source
	ConfigPath   string
	ConfigSource Source
}

// ResolveInputs selects the root (flag, SAIVAGE_ROOT, working directory) and
// the config path (flag, SAIVAGE_CONFIG, <root>/.saivage/config.yaml). Each
// chain picks its raw source first; the chosen value is then made absolute.
func ResolveInputs(f Flags, lookupEnv func(string) (string, bool)) (Inputs, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var in Inputs
	switch v, ok := lookupEnv(EnvRoot); {
	case f.Root != "":
		in.Root, in.RootSource = f.Root, FromFlag
	case ok && v != "":
		in.Root, in.RootSource = v, FromEnv
	default:
		wd, err := os.Getwd()
		if err != nil {
			return Inputs{}, fmt.Errorf("select project root: %w", err)
		}
		in.Root, in.RootSource = wd, FromCwd
	}
	root, err := filepath.Abs(in.Root)
	if err != nil {
		return Inputs{}, fmt.Errorf("select project root %q: %w", in.Root, err)
	}
	in.Root = root
	switch v, ok := lookupEnv(EnvConfig); {
	case f.Config != "":
		in.ConfigPath, in.ConfigSource = f.Config, FromFlag
	case ok && v != "":
		in.ConfigPath, in.ConfigSource = v, FromEnv
	default:
		in.ConfigPath, in.ConfigSource = filepath.Join(root, StateDir, "config.yaml"), FromDefault
	}
	if in.ConfigPath, err = filepath.Abs(in.ConfigPath); err != nil {
		return Inputs{}, fmt.Errorf("select config path: %w", err)
	}
	return in, nil
}

// Listen is the selected operator listener address.
type Listen struct {
	Host       string
	HostSource Source
	Port       int
	PortSource Source
}

// ResolveServer selects host and port: flag, environment, YAML, default.
// An invalid SAIVAGE_PORT is an error naming the variable.
func ResolveServer(f Flags, lookupEnv func(string) (string, bool), cfg *Config) (Listen, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var l Listen
	var yamlServer Server
	if cfg != nil && cfg.Server != nil {
		yamlServer = *cfg.Server
	}
	switch v, ok := lookupEnv(EnvHost); {
	case f.Host != "":
		l.Host, l.HostSource = f.Host, FromFlag
	case ok && v != "":
		l.Host, l.HostSource = v, FromEnv
	case yamlServer.Host != "":
		l.Host, l.HostSource = yamlServer.Host, FromYAML
	default:
		l.Host, l.HostSource = DefaultHost, FromDefault
	}
	switch v, ok := lookupEnv(EnvPort); {
	case f.Port != 0:
		if f.Port < 1 || f.Port > 65535 {
			return Listen{}, fmt.Errorf("--port %d is outside 1..65535", f.Port)
		}
		l.Port, l.PortSource = f.Port, FromFlag
	case ok && v != "":
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return Listen{}, fmt.Errorf("%s=%q is not a port number in 1..65535", EnvPort, v)
		}
		l.Port, l.PortSource = p, FromEnv
	case yamlServer.Port != 0:
		l.Port, l.PortSource = yamlServer.Port, FromYAML
	default:
		l.Port, l.PortSource = DefaultPort, FromDefault
	}
	return l, nil
}
