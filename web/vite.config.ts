import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// The dashboard (docs/dashboard.md): Preact, built into dist/web, served by the service under /ui.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('../dist/web', import.meta.url)),
    emptyOutDir: true,
    // No inline polyfill script: the page runs under a CSP without 'unsafe-inline'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    target: 'es2022',
  },
});
