# nix/link-driver.nix without NixOS (Nixpkgs cannot be fetched where the tests run): the module function
# is called with stand-ins for what it uses, and what it declares and makes is handed to the test as
# plain data (nix-instantiate --eval --strict --json), with the service's script for the test to run.
#
# - lib holds only the functions the module calls, each as Nixpkgs defines it, with the module
#   system's markers as it writes them (mkIf: { _type = "if"; condition; content; }, mkForce: an
#   override of priority 50); option types are named, not checked.
# - config holds the option values a NixOS configuration would give (the module system's job is to
#   merge them from the declarations; here they are given), and hardware.* as NixOS' graphics and
#   nvidia modules define them.
# - pkgs.buildEnv records its arguments and stands for the path `graphicsEnv`.
#
#   cudaPatchelf  the package whose bin/cuda-patchelf the script runs
#   driver        the NVIDIA driver package (its lib/ holds the driver's libraries)
#   cudaCompat    cuda_compat packages, a list of paths
#   driverLink    the link to make
#   graphicsEnv   the path of the graphics drivers environment; null: hardware.graphics not enabled
#   extraArgs     more arguments for link-driver
{
  cudaPatchelf,
  driver,
  cudaCompat ? [ ],
  driverLink ? "/run/opengl-driver",
  graphicsEnv ? null,
  extraArgs ? [ ],
}:
let
  lib = rec {
    mkOption = attrs: attrs // { _type = "option"; };
    mkEnableOption = name: mkOption {
      type = types.bool;
      default = false;
      description = "Whether to enable ${name}.";
    };
    mkIf = condition: content: {
      _type = "if";
      inherit condition content;
    };
    mkForce = content: {
      _type = "override";
      priority = 50;
      inherit content;
    };
    literalExpression = text: {
      _type = "literalExpression";
      inherit text;
    };
    types = {
      bool = "bool";
      str = "str";
      path = "path";
      package = "package";
      listOf = type: "listOf ${type}";
      either = a: b: "either ${a} ${b}";
    };
    optionals = condition: list: if condition then list else [ ];
    concatMap = f: list: builtins.concatLists (map f list);
    # As Nixpkgs' lib/strings.nix: a word of safe characters as it is, anything else in single quotes.
    escapeShellArg =
      arg:
      let
        string = toString arg;
      in
      if builtins.match "[[:alnum:],._+:@%/-]+" string == null then
        "'${builtins.replaceStrings [ "'" ] [ "'\\''" ] string}'"
      else
        string;
    escapeShellArgs = args: builtins.concatStringsSep " " (map escapeShellArg args);
    getExe = package: "${package}/bin/${package.meta.mainProgram}";
  };

  config = {
    services.cuda-patchelf-link-driver = {
      enable = true;
      package = {
        outPath = cudaPatchelf;
        meta.mainProgram = "cuda-patchelf";
      };
      driver.outPath = driver;
      inherit cudaCompat driverLink extraArgs;
    };
    hardware.graphics = {
      enable = graphicsEnv != null;
      package = "mesa.drivers";
      extraPackages = [ "nvidia-x11.out" ];
    };
    hardware.nvidia.package = "nvidia-x11";
  };

  pkgs = {
    buildEnv = attrs: attrs // { outPath = toString graphicsEnv; };
    libGL = "libGL";
    callPackage = file: args: "callPackage ${baseNameOf (toString file)}";
  };

  module = import ../link-driver.nix { inherit config lib pkgs; };
  options = module.options.services.cuda-patchelf-link-driver;
  made = module.config.content;
  service = made.systemd.services.cuda-patchelf-link-driver;
in
{
  options = builtins.mapAttrs (_: option: { inherit (option) type default; }) options;
  condition = module.config.condition;
  tmpfiles = made.systemd.tmpfiles.settings.graphics-driver;
  service = {
    inherit (service) wantedBy before after restartIfChanged serviceConfig script;
  };
}
