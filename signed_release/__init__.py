"""The signed release format: manifest, detached Ed25519 signature, key files and key ids.

Used by the release tool (`nachtwacht release`), the control plane (checking a release before
publishing it) and the agent (the first step of verifying an update). Import from the module that
holds a name; this package imports nothing itself, so an agent that only compares versions does
not load the cryptography it needs only when an update runs.

    manifest        `Manifest`, `parse_manifest`: the signed fields, read strictly
    signature       `sign_manifest`, `check_signature`: the detached signature over the bytes
    keys            key files (release.key/.pub, root.key/.pub), `key_id` (sha256 of the raw
                    public key), `load_public_keys`
    trust_root      the signed, versioned list of release keys and the rules to follow it
    versions        `is_valid_version`, `version_key`: how agent versions compare
    build_archive   what a build may hold: `lint_build`, `unpack_build`
    artifact        `describe_artifact`, `AGENT_ENTRY_POINT`: what a build says about itself
    errors          the exception tree (`ReleaseError` and its kinds)
    cli             `nachtwacht release keygen | sign | verify`
    root_cli        `nachtwacht release root-keygen | root-init | root-next | root-sign |
                    root-show`: trust roots made and signed offline
    cli_support     what the commands share: the usage error, durations, `ExtraCommand`
    atomic_files    `write_new_file`, `replace_file`: files written whole or not at all
    bounded_read    `read_at_most`: a file named on a command line, never read to a device's end
"""
