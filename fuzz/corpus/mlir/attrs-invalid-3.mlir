sd.mesh @mesh = <["data"=8(dcn=3)]>
