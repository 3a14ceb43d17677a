// Builds the UI into $SKP_WEB_OUT (set by web/CMakeLists.txt) or web/dist. Relative asset URLs
// so skyprofd can serve the files from any prefix; no CDN, everything is bundled.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  build: {
    outDir: process.env.SKP_WEB_OUT || 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 300,
  },
  server: {
    proxy: { '/api': process.env.SKYPROF_SERVER || 'http://127.0.0.1:12800' },
  },
});
