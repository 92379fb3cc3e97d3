/**
 * The environment of a run, as resolved when a worker claims it: what the worker prepares the
 * workspace from (repositories, setup commands, variables) and, with the commits it checked out,
 * what is recorded on the run so that it can be reproduced. JSON-safe: it crosses the worker HTTP
 * API inside an assignment. Pure types, no imports: every backend (bwrap, user, docker) reads it.
 *
 * Secret values are never part of it: `secrets` names them, and the values travel beside it, in the
 * assignment only (`Assignment.environment_secrets`), never recorded or shown.
 */

/** One repository cloned into the workspace before the harness starts. */
export interface ResolvedRepository {
  /** A git URL (https://, ssh://, git://, user@host:path) or a local path the repository policy allows the team; never a credential in it. */
  url: string;
  /** The folder in the workspace it is cloned into (relative, one or more plain names). */
  path: string;
  /** The branch checked out (its head when cloned); absent with no `ref`: the remote's default branch. */
  branch?: string;
  /** A commit, tag or ref checked out (detached) instead of a branch head. */
  ref?: string;
  /** The team secret that authenticates the fetch: a token over https, a private key over ssh. */
  credential_secret?: string;
  /** The user name sent with an https token (default `x-access-token`). */
  username?: string;
  /** The commit checked out, set by the worker once cloned (what the run recorded). */
  commit?: string;
}

/** The network a container of this environment gets (the Docker backend; bwrap shares the host's). */
export type EnvironmentNetwork = 'bridge' | 'none';

export interface ResolvedEnvironment {
  /** The environment's uid and name (`environment_id` names either). */
  uid: string;
  name: string;
  /** The image the Docker backend runs the run in; absent: the worker's default image. */
  docker_image?: string;
  network?: EnvironmentNetwork;
  repositories: ResolvedRepository[];
  /** Shell command lines run in order in the workspace, in the sandbox, before the harness. */
  setup_commands: string[];
  /** Plain variables, for the setup commands and the harness. */
  env_vars: Record<string, string>;
  /** Secret variables: variable name → team secret name (values only in the assignment). */
  secrets: Record<string, string>;
}
