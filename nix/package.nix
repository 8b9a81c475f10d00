# cuda-patchelf for Nixpkgs: the CLI, built with buildNpmPackage, and its setup hooks (hooks/*.sh) as
# passthru packages made with makeSetupHook, drop-ins for Nixpkgs' autoPatchelfHook, autoAddDriverRunpath,
# autoAddCudaCompatRunpath and removeStubsFromRunpathHook that run one `cuda-patchelf apply` per build.
# From a checkout:
#
#   cuda-patchelf = pkgs.callPackage ./nix/package.nix { };
#   # in a CUDA derivation, instead of Nixpkgs' hooks (the stubs hook in depsBuildBuild: under strictDeps
#   # it works from there only, as Nixpkgs' own does):
#   depsBuildBuild = [ cuda-patchelf.removeStubsFromRunpathHook ];
#   nativeBuildInputs = [
#     cuda-patchelf.autoPatchelfHook
#     cuda-patchelf.autoAddDriverRunpathHook
#   ] ++ lib.optionals cudaPackages.flags.isJetsonBuild [ cuda-patchelf.autoAddCudaCompatRunpathHook ];
#
# docs/nix.md says what each hook does, its switches, and what of this file is tested without Nixpkgs.
{
  lib,
  buildNpmPackage,
  importNpmLock,
  makeSetupHook,
  addDriverRunpath,
  cudaPackages,
  nodejs,
}:

let
  # One version, the npm package's: the file lives in the repository it builds.
  packageJson = lib.importJSON ../package.json;

  # npm's tarball URL on its registry, for a package of package-lock.json ("node_modules/@scope/name",
  # or nested under another package's node_modules): REGISTRY/@scope/name/-/name-VERSION.tgz.
  registryTarball =
    path: module:
    let
      name = module.name or (lib.last (lib.splitString "node_modules/" path));
    in
    "https://registry.npmjs.org/${name}/-/${lib.last (lib.splitString "/" name)}-${module.version}.tgz";

  # The lock with each registry package's URL: this repository's lock leaves "resolved" out (npm's
  # omit-lockfile-registry-resolved; npm finds the tarball on its registry by name and version), and
  # importNpmLock fetches each package from that URL, checked against the lock's own "integrity".
  packageLock =
    let
      lock = lib.importJSON ../package-lock.json;
    in
    lock
    // {
      packages = lib.mapAttrs (
        path: module:
        if path == "" || module ? resolved || !(module ? integrity) then
          module
        else
          module // { resolved = registryTarball path module; }
      ) lock.packages;
    };
in
buildNpmPackage (finalAttrs: {
  pname = "cuda-patchelf";
  inherit (packageJson) version;

  # Only what the build reads: a checkout's node_modules/, dist/ and test fixtures (about 1 GB) must not
  # be copied into the store, nor change the source hash.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../package.json
      ../package-lock.json
      ../tsconfig.json
      ../src
      ../hooks
      ../README.md
      ../LICENSE
    ];
  };

  # The npm dependencies that package-lock.json pins, all of them build-time ones (esbuild bundles the
  # runtime ones into dist/, so the installed package has no node_modules): Nix fetches each with the
  # hash the lock records, so there is no hash of them all to fill in by hand when the lock changes.
  npmDeps = importNpmLock {
    package = packageJson;
    inherit packageLock;
  };
  npmConfigHook = importNpmLock.npmConfigHook;

  # esbuild bundles the CLI and its worker thread into dist/cli (package.json's "build" script).
  npmBuildScript = "build";
  # npmInstallHook lists the files to install with `npm pack --dry-run`, which would otherwise run the
  # prepack script, that is a second build of dist/ inside the install phase.
  npmPackFlags = [ "--ignore-scripts" ];

  passthru =
    let
      cudaPatchelf = finalAttrs.finalPackage;
      # What the hook files' @placeholders@ are filled with. Each hook gets all of them; a hook file uses
      # those it needs (makeSetupHook's substituteAll replaces the ones that occur).
      substitutions = {
        # The command the hooks run: this package, whatever else is on PATH.
        cudaPatchelf = lib.getExe cudaPatchelf;
        # The part the three hooks share stays in the package; each hook sources it by this path.
        cudaPatchelfFixup = "${cudaPatchelf}/lib/node_modules/cuda-patchelf/hooks/cuda-patchelf-fixup.sh";
        # /run/opengl-driver (-32 on i686): the driver hook adds its lib/, and stubs removal puts it where
        # the first stubs entry was.
        inherit (addDriverRunpath) driverLink;
      };
      # cuda_compat exists for Jetson (aarch64) only; elsewhere @cudaCompat@ is filled with nothing, as
      # Nixpkgs leaves its own hook without a directory there.
      cudaCompat = cudaPackages.cuda_compat or null;
      hasCudaCompat = cudaCompat != null && (cudaCompat.meta.available or false);

      mkHook =
        {
          name,
          script,
          extraSubstitutions ? { },
        }:
        makeSetupHook {
          inherit name;
          # A hook sits in nativeBuildInputs or depsBuildBuild, so what it propagates lands in
          # nativeBuildInputs: cuda-patchelf is on the build's PATH, for phases that call it themselves.
          propagatedBuildInputs = [ cudaPatchelf ];
          substitutions = substitutions // extraSubstitutions;
          meta = {
            inherit (finalAttrs.meta) license platforms;
          };
        } script;
    in
    {
      autoPatchelfHook = mkHook {
        name = "cuda-patchelf-auto-patchelf-hook";
        script = ../hooks/auto-patchelf.sh;
      };

      autoAddDriverRunpathHook = mkHook {
        name = "cuda-patchelf-auto-add-driver-runpath-hook";
        script = ../hooks/auto-add-driver-runpath.sh;
      };

      autoAddCudaCompatRunpathHook = mkHook {
        name = "cuda-patchelf-auto-add-cuda-compat-runpath-hook";
        script = ../hooks/auto-add-cuda-compat-runpath.sh;
        # The package itself: the hook adds its compat/ directory.
        extraSubstitutions.cudaCompat = lib.optionalString hasCudaCompat "${cudaCompat}";
      };

      removeStubsFromRunpathHook = mkHook {
        name = "cuda-patchelf-remove-stubs-from-runpath-hook";
        script = ../hooks/remove-stubs-from-runpath.sh;
      };
    };

  meta = {
    inherit (packageJson) description;
    longDescription = ''
      cuda-patchelf reads every ELF file of a build output once, computes the final runpath from the
      autoPatchelf resolver, the driver, cuda_compat and stubs-removal hooks at once, and writes each file
      once, touching only the bytes that change. Its setup hooks replace Nixpkgs' autoPatchelfHook,
      autoAddDriverRunpath and autoAddCudaCompatRunpath, which run patchelf two or three times per file
      per hook.
    '';
    license = lib.licenses.mit;
    mainProgram = "cuda-patchelf";
    inherit (nodejs.meta) platforms;
    maintainers = [ ];
  };
})
