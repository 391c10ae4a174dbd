// Saivage code-quality child: runs one analyzer in-process through its
// library API and prints one complete JSON report on stdout. It writes no
// files. Usage: node child.cjs ANALYZER ROOT FILE...
'use strict';
const fs = require('fs');
const path = require('path');

async function eslintReport(kind, root, files) {
  const { ESLint } = require('eslint');
  const pkg = require('eslint/package.json');
  const own = ['eslint.config.js', 'eslint.config.mjs', 'eslint.config.cjs', 'eslint.config.ts']
    .some((f) => fs.existsSync(path.join(root, f)));
  let base;
  if (kind === 'typescript_eslint') {
    const tseslint = require('typescript-eslint');
    base = tseslint.configs.recommended.map((c) => ({ ...c, files: ['**/*.ts', '**/*.tsx', '**/*.mts', '**/*.cts'] }));
  } else {
    base = [{ files: ['**/*.js', '**/*.mjs', '**/*.cjs', '**/*.jsx'], ...require('@eslint/js').configs.recommended }];
  }
  const eslint = new ESLint(own ? { cwd: root } : { cwd: root, overrideConfigFile: true, baseConfig: base });
  const results = await eslint.lintFiles(files);
  const findings = [];
  for (const r of results) {
    for (const m of r.messages) {
      findings.push({ path: path.relative(root, r.filePath), line: m.line || 0, column: m.column || 0,
        rule: m.ruleId || '', severity: m.severity === 2 ? 'error' : 'warning', message: m.message, fixable: !!m.fix });
    }
  }
  return { tool: 'eslint', version: pkg.version, config: own ? 'project' : 'bundled', findings };
}

function ruffReport(root, files) {
  const { Workspace } = require('@astral-sh/ruff-wasm-nodejs');
  const ws = new Workspace(Workspace.defaultSettings(), 0);
  const findings = [];
  for (const f of files) {
    const abs = path.resolve(root, f);
    for (const d of ws.check(fs.readFileSync(abs, 'utf8'))) {
      findings.push({ path: path.relative(root, abs), line: d.start_location.row, column: d.start_location.column,
        rule: d.code || '', severity: 'error', message: d.message, fixable: !!d.fix });
    }
  }
  return { tool: 'ruff', version: Workspace.version(), config: 'bundled', findings };
}

(async () => {
  const [analyzer, root, ...files] = process.argv.slice(2);
  let report;
  switch (analyzer) {
    case 'javascript_eslint':
    case 'typescript_eslint':
      report = await eslintReport(analyzer, root, files);
      break;
    case 'python_ruff':
      report = ruffReport(root, files);
      break;
    default:
      throw new Error(`unknown analyzer ${analyzer}`);
  }
  report.analyzer = analyzer;
  report.files = files.length;
  process.stdout.write(JSON.stringify(report));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e));
  process.exit(2);
});
