/**
 * Undefined for a Docker image reference (`name[:tag][@digest]`, with a registry host or not); else
 * why not. Checked before an image (the worker's, or a team's environment's) reaches `docker`, where
 * a value starting with `-` would be read as an option.
 */
export function imageProblem(image: string): string | undefined {
  if (/^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/.test(image) && !image.includes('//')) return undefined;
  return `"${image.slice(0, 100)}" is not a Docker image reference (e.g. debian:bookworm-slim)`;
}
