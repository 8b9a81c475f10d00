# nix/package.nix without Nixpkgs (which cannot be fetched where the tests run): the file is called with
# stand-ins for the Nixpkgs functions it uses, taking the same arguments as the real ones, and built with
# raw derivations, so that Debian's nix-bin builds it offline (`sandbox = false`: the builders run the
# host's /bin/bash, tar and node).
#
# - buildNpmPackage lays out the tarball of `npm pack` the way Nixpkgs' npmInstallHook installs a package:
#   the files that `npm pack` lists under $out/lib/node_modules/<name>, and for each "bin" entry of
#   package.json an executable $out/bin/<bin> that runs node on it (makeWrapper's job there). Nixpkgs
#   builds those files itself (npm ci, `npm run <npmBuildScript>`); the tarball's dist/ is the output of
#   the same build script, run by npm's prepack. The function form (finalAttrs: ...) is supported, with
#   finalAttrs.finalPackage, and passthru lands on the package as in mkDerivation.
# - importNpmLock takes the real one's arguments and decides as it does what each package of the lock
#   is fetched from (pkgs/build-support/node/import-npm-lock: fetchurl of "resolved" with the lock's
#   "integrity" as the hash; a package without "resolved" is not fetched at all, and npm, offline in
#   the sandbox, could not get it: an evaluation error here). It fetches nothing: `fetches` lists them.
# - makeSetupHook has the real one's arguments (an unknown one is an evaluation error, as there):
#   nix-support/setup-hook is the script with each @name@ of substitutions replaced, and
#   nix-support/propagated-build-inputs lists propagatedBuildInputs.
# - lib holds only the functions package.nix calls; lib.fileset.toSource returns the list of files it
#   was given, for the test to check.
#
#   tarball     the tarball `npm pack` made
#   node        the node binary the installed executables run
#   path        PATH for the builders (tar, gzip, coreutils)
#   driverLink  addDriverRunpath.driverLink
#   cudaCompat  the path cudaPackages.cuda_compat stands for; null: no cuda_compat in cudaPackages
#   runId       a new value for each test run, so that each run builds afresh
{
  system ? builtins.currentSystem,
  tarball,
  node,
  path,
  driverLink,
  cudaCompat ? null,
  runId,
}:
let
  lib = {
    importJSON = file: builtins.fromJSON (builtins.readFile file);
    fileset = {
      toSource = { root, fileset }: { root = toString root; files = map toString fileset; };
      unions = files: files;
    };
    optionalString = condition: string: if condition then string else "";
    getExe = drv: "${drv}/bin/${drv.meta.mainProgram}";
    last = list: builtins.elemAt list (builtins.length list - 1);
    # The separators package.nix splits at ("/", "node_modules/") hold no regular expression characters.
    splitString = separator: string: builtins.filter builtins.isString (builtins.split separator string);
    inherit (builtins) mapAttrs;
    mapAttrsToList = f: attrs: map (name: f name attrs.${name}) (builtins.attrNames attrs);
    licenses.mit = { spdxId = "MIT"; };
  };

  builderAttrs = {
    inherit system runId;
    builder = "/bin/bash";
    PATH = path;
  };

  buildNpmPackage =
    fn:
    let
      attrs = if builtins.isFunction fn then fn (attrs // { finalPackage = package; }) else fn;
      layout = derivation (builderAttrs // {
        name = "${attrs.pname}-${attrs.version}";
        inherit node;
        tarball = builtins.path { path = tarball; name = "cuda-patchelf-npm-pack.tgz"; };
        args = [ "-euo" "pipefail" "-c" ''
          mkdir unpacked
          tar -xzf "$tarball" -C unpacked
          name=$("$node" -p 'require("./unpacked/package/package.json").name')
          packageOut=$out/lib/node_modules/$name
          mkdir -p "$packageOut"
          cp -R unpacked/package/. "$packageOut"
          # package.json's "bin": a string (named after the package) or an object of name -> file.
          "$node" -e '
            const pkg = require("./unpacked/package/package.json");
            const bins = typeof pkg.bin === "string" ? { [pkg.name]: pkg.bin } : pkg.bin ?? {};
            for (const [bin, file] of Object.entries(bins)) console.log(bin + "\t" + file);
          ' | while IFS=$'\t' read -r bin file; do
            mkdir -p "$out/bin"
            printf '#!/bin/bash\nexec %q %q "$@"\n' "$node" "$packageOut/$file" > "$out/bin/$bin"
            chmod +x "$out/bin/$bin"
          done
        '' ];
      });
      package = layout // attrs.passthru // {
        inherit (attrs) pname version meta passthru;
        standIn = attrs;
      };
    in
    package;

  # As Nixpkgs defines it: a set with the hook, callable through __functor.
  importNpmLock = {
    npmConfigHook = "importNpmLock.npmConfigHook";
    __functor =
      _:
      {
        npmRoot ? null,
        package ? lib.importJSON (npmRoot + "/package.json"),
        packageLock ? lib.importJSON (npmRoot + "/package-lock.json"),
        pname ? package.name or "unknown",
        version ? package.version or "0.0.0",
      }:
      {
        inherit pname version;
        fetches = builtins.concatLists (
          lib.mapAttrsToList (
            path: module:
            if path == "" then
              [ ]
            else if !(module ? resolved) then
              throw "importNpmLock: ${path} has no \"resolved\": it would not be fetched, and npm cannot fetch it in the sandbox"
            else if builtins.match "https?://.+" module.resolved == null then
              throw "importNpmLock: ${path}: ${module.resolved} is not a URL it fetches"
            else
              [
                {
                  inherit path;
                  url = module.resolved;
                  hash = module.integrity;
                }
              ]
          ) packageLock.packages
        );
      };
  };

  makeSetupHook =
    {
      name ? "hook",
      propagatedBuildInputs ? [ ],
      depsTargetTargetPropagated ? [ ],
      meta ? { },
      passthru ? { },
      substitutions ? { },
    }:
    script:
    derivation (substitutions // builderAttrs // {
      inherit name script propagatedBuildInputs;
      substitutionNames = builtins.attrNames substitutions;
      args = [ "-euo" "pipefail" "-c" ''
        mkdir -p "$out/nix-support"
        hook=$(< "$script")
        for var in $substitutionNames; do
          hook=''${hook//"@$var@"/''${!var}}
        done
        printf '%s\n' "$hook" > "$out/nix-support/setup-hook"
        printf '%s\n' "$propagatedBuildInputs" > "$out/nix-support/propagated-build-inputs"
      '' ];
    }) // passthru // {
      inherit meta passthru;
      standIn = { inherit name script propagatedBuildInputs depsTargetTargetPropagated substitutions; };
    };

  cudaCompatPackage = {
    outPath = cudaCompat;
    meta.available = true;
  };

  package = import ../package.nix {
    inherit lib buildNpmPackage importNpmLock makeSetupHook;
    addDriverRunpath = { inherit driverLink; };
    cudaPackages = if cudaCompat == null then { } else { cuda_compat = cudaCompatPackage; };
    nodejs.meta.platforms = [ system ];
  };

  hookNames = [ "autoPatchelfHook" "autoAddDriverRunpathHook" "autoAddCudaCompatRunpathHook" "removeStubsFromRunpathHook" ];
in
{
  inherit package;

  # What package.nix asked of the Nixpkgs functions, for the test to compare with package.json and hooks/.
  summary = {
    inherit (package.standIn) pname version npmBuildScript npmPackFlags npmConfigHook;
    npmDeps = { inherit (package.standIn.npmDeps) pname version fetches; };
    src = package.standIn.src;
    meta = { inherit (package.meta) description license mainProgram platforms; };
    out = package.outPath;
    hooks = builtins.listToAttrs (map (attr: {
      name = attr;
      value = {
        inherit (package.${attr}.standIn) name substitutions;
        script = toString package.${attr}.standIn.script;
        propagatedBuildInputs = map (input: input.outPath) package.${attr}.standIn.propagatedBuildInputs;
        broken = package.${attr}.meta.broken or false;
        out = package.${attr}.outPath;
      };
    }) hookNames);
  };

  # Every derivation's output and .drv, and the tarball's copy, for the test to delete what a run added.
  storePaths = [ package.outPath package.drvPath package.tarball ]
    ++ builtins.concatMap (attr: [ package.${attr}.outPath package.${attr}.drvPath ]) hookNames;
}
